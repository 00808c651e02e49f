#!/bin/bash
# A real model prints the same ids at every TP degree (SmolLM2 Q4_1, Gemma 3 270M): tpserve-run, 64 tokens
# for three greedy prompts and one seeded sampling run (temperature 0.8), at --tp 2, 3 and 4 against
# --tp 1. Exact equality holds because the row-parallel sums are fixed point (kernels/cpu/
# matmul_fixed_point.h). Exit 0 when every run matches, 1 when not, 77 (skipped) without the model.
#   tests/mpi/tp_equality_test.sh TPSERVE_RUN MODEL
set -uo pipefail
run=$1
model=$2
if [[ ! -f "$model" ]]; then
  echo "tp-equality: no model at $model; skipped"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# name|flags: three greedy prompts and one seeded sampling run.
cases=(
  "greedy-france|--prompt|The capital of France is"
  "greedy-code|--prompt|def fibonacci(n):"
  "greedy-ids|--prompt-ids|504,3060,282,4649,314,1345,30,1117,1826,4063,282"
  "sampled|--prompt|Once upon a time|--temperature|0.8|--seed|1234"
)
failed=0
for case in "${cases[@]}"; do
  IFS='|' read -r -a parts <<<"$case"
  name=${parts[0]}
  flags=(--model "$model" "${parts[@]:1}" --max-tokens 64 --ignore-eos --print-ids --threads 1)
  reference=$("$run" "${flags[@]}" --tp 1 2>"$err") || { cat "$err"; exit 1; }
  if [[ $(wc -w <<<"$reference") != 64 ]]; then
    echo "tp-equality: $name: expected 64 ids at --tp 1, got: $reference"
    exit 1
  fi
  for tp in 2 3 4; do
    ids=$("$run" "${flags[@]}" --tp "$tp" 2>"$err") || { cat "$err"; exit 1; }
    if [[ "$ids" == "$reference" ]]; then
      echo "tp-equality: $name --tp $tp: identical 64 ids"
    else
      echo "tp-equality: $name --tp $tp differs from --tp 1"
      echo "  tp 1:  $reference"
      echo "  tp $tp: $ids"
      failed=1
    fi
  done
done
exit $failed
