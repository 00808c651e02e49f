#!/bin/bash
# The real model prints the same ids at every instruction-set level: SmolLM2 Q4_1 through tpserve-run,
# 64 tokens for two greedy prompts and two seeded sampling runs (temperature, top-k, top-p),
# at TPSERVE_ISA=avx2 and avx512 against portable (the canonical order in scalar code); the last
# case also at --tp 2. A level this CPU or build cannot run is skipped. Exit 0 when every run
# matches, 1 when not, 77 (skipped) without the model.
#   tests/worker/isa_equality_run_test.sh TPSERVE_RUN MODEL
set -uo pipefail
run=$1
model=$2
if [[ ! -f "$model" ]]; then
  echo "isa-equality: no model at $model; skipped"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# name|flags
cases=(
  "greedy-france|--prompt|The capital of France is"
  "greedy-code|--prompt|def fibonacci(n):"
  "sampled|--prompt|Once upon a time|--temperature|0.8|--seed|1234"
  "sampled-filters|--prompt|Write a poem about the sea.|--temperature|1.1|--top-k|50|--top-p|0.9|--seed|7|--tp|2"
)
failed=0
for case in "${cases[@]}"; do
  IFS='|' read -r -a parts <<<"$case"
  name=${parts[0]}
  flags=(--model "$model" "${parts[@]:1}" --max-tokens 64 --ignore-eos --print-ids --threads 1)
  reference=$(TPSERVE_ISA=portable "$run" "${flags[@]}" 2>"$err") || { cat "$err"; exit 1; }
  if [[ $(wc -w <<<"$reference") != 64 ]]; then
    echo "isa-equality: $name: expected 64 ids at portable, got: $reference"
    exit 1
  fi
  for isa in avx2 avx512; do
    if ! ids=$(TPSERVE_ISA=$isa "$run" "${flags[@]}" 2>"$err"); then
      if grep -q "lacks the instructions\|holds only the portable" "$err"; then
        echo "isa-equality: $name $isa: not runnable here; skipped"
        continue
      fi
      cat "$err"
      exit 1
    fi
    if [[ "$ids" == "$reference" ]]; then
      echo "isa-equality: $name $isa: identical 64 ids"
    else
      echo "isa-equality: $name $isa differs from portable"
      echo "  portable: $reference"
      echo "  $isa: $ids"
      failed=1
    fi
  done
done
exit $failed
