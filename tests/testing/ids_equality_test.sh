#!/bin/bash
# A real model (SmolLM2 Q4_1, Gemma 3 270M Q4_K_M) prints the same ids along one dimension of how it is
# run: tpserve-run, 64 tokens per case (greedy prompts and seeded sampling), every variant against the
# reference variant. Exit 0 when every run matches, 1 when not, 77 (skipped) without the model.
#   tests/testing/ids_equality_test.sh tp|isa TPSERVE_RUN MODEL
# tp:  --tp 2, 3 and 4 against --tp 1 (exact because the row-parallel sums are fixed point:
#      kernels/cpu/matmul_fixed_point.h).
# isa: TPSERVE_ISA=avx2 and avx512 against portable (the canonical order in scalar code); a level this
#      CPU or build cannot run is skipped. Its last case runs at --tp 2.
set -uo pipefail
dimension=$1
run=$2
model=$3
if [[ ! -f "$model" ]]; then
  echo "$dimension-equality: no model at $model; skipped"
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
)
case $dimension in
  tp)
    reference_variant=1 variants=(2 3 4)
    cases+=("greedy-ids|--prompt-ids|504,3060,282,4649,314,1345,30,1117,1826,4063,282")
    ;;
  isa)
    reference_variant=portable variants=(avx2 avx512)
    cases+=("sampled-filters|--prompt|Write a poem about the sea.|--temperature|1.1|--top-k|50|--top-p|0.9|--seed|7|--tp|2")
    ;;
  *)
    echo "usage: $0 tp|isa TPSERVE_RUN MODEL" >&2
    exit 2
    ;;
esac

# run_variant VARIANT FLAGS...: the ids tpserve-run prints under VARIANT.
run_variant() {
  local variant=$1
  shift
  if [[ $dimension == tp ]]; then
    "$run" "$@" --tp "$variant" 2>"$err"
  else
    TPSERVE_ISA=$variant "$run" "$@" 2>"$err"
  fi
}

failed=0
for case in "${cases[@]}"; do
  IFS='|' read -r -a parts <<<"$case"
  name=${parts[0]}
  flags=(--model "$model" "${parts[@]:1}" --max-tokens 64 --ignore-eos --print-ids --threads 1)
  reference=$(run_variant "$reference_variant" "${flags[@]}") || { cat "$err"; exit 1; }
  if [[ $(wc -w <<<"$reference") != 64 ]]; then
    echo "$dimension-equality: $name: expected 64 ids at $reference_variant, got: $reference"
    exit 1
  fi
  for variant in "${variants[@]}"; do
    if ! ids=$(run_variant "$variant" "${flags[@]}"); then
      if grep -q "lacks the instructions\|holds only the portable" "$err"; then
        echo "$dimension-equality: $name $variant: not runnable here; skipped"
        continue
      fi
      cat "$err"
      exit 1
    fi
    if [[ "$ids" == "$reference" ]]; then
      echo "$dimension-equality: $name $variant: identical 64 ids"
    else
      echo "$dimension-equality: $name $variant differs from $reference_variant"
      echo "  $reference_variant: $reference"
      echo "  $variant: $ids"
      failed=1
    fi
  done
done
exit $failed
