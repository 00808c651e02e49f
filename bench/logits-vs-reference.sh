#!/usr/bin/env bash
# Teacher-forced logits of tpserve and llama.cpp beside the float64 reference on every file of issue 13
# (bench/logits_vs_reference.py, one JSON per file under $RESULTS): the real Gemma 3 270M Q4_K_M file
# (--bos); SmolLM2-135M-Instruct requantized by llama-quantize --allow-requantize from the Q4_1 file to
# Q4_K_M, Q5_K_M, Q6_K, Q5_0, Q8_0 and F32 (the control: no activation rounding in either engine), and
# the Q4_1 file itself; the synthetic F32 llama, qwen2, qwen3, gemma3 and phi3 files of
# `tpserve-mkmodel --preset ARCH-tiny`. Builds bench/peers/llama_logits first. The reference of a real
# file takes minutes (Gemma 3: 10 sequences of ~24 positions in float64 loops).
#   bench/logits-vs-reference.sh [NAME...]      (default: every file; names as in $RESULTS: gemma3-270m-Q4_K_M,
#                                                smollm2-Q4_K_M, ..., synthetic-qwen2-F32, ...)
# Environment: BUILD (build: its tpserve-teacher-logits), MKMODEL ($BUILD/model/tpserve-mkmodel), LLAMA_CPP_DIR
#              (third_party/llama.cpp), MODELS (models), BENCH_TMP (/tmp/tpserve-bench: requantized and
#              synthetic files), THREADS (2), RESULTS (bench/results/logits_vs_reference).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MKMODEL=${MKMODEL:-$BUILD/model/tpserve-mkmodel}
LLAMA_CPP_DIR=$(realpath "${LLAMA_CPP_DIR:-third_party/llama.cpp}")
MODELS=${MODELS:-models}
tmp=${BENCH_TMP:-/tmp/tpserve-bench}
THREADS=${THREADS:-2}
RESULTS=${RESULTS:-bench/results/logits_vs_reference}
bin=$LLAMA_CPP_DIR/build/bin
LLAMA_CPP_DIR=$LLAMA_CPP_DIR bench/peers/build-llama-logits.sh >/dev/null
mkdir -p "$RESULTS" "$tmp"
teacher=$BUILD/tests/testing/tpserve-teacher-logits
[ -x "$teacher" ] || { echo "logits-vs-reference: $teacher missing (cmake --build $BUILD --target tpserve-teacher-logits)" >&2; exit 1; }

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(gemma3-270m-Q4_K_M smollm2-Q4_K_M smollm2-Q5_K_M smollm2-Q6_K smollm2-Q5_0 smollm2-Q8_0
                                  smollm2-Q4_1 smollm2-F32 synthetic-llama-F32 synthetic-qwen2-F32 synthetic-qwen3-F32
                                  synthetic-gemma3-F32 synthetic-phi3-F32)
for name in "${names[@]}"; do
  flags=()
  case $name in
    gemma3-270m-Q4_K_M) file=$MODELS/gemma-3-270m-q4_k_m.gguf; flags=(--bos) ;;
    smollm2-Q4_1) file=$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf ;;
    smollm2-*)
      file=$tmp/$name.gguf
      [ -s "$file" ] || "$bin/llama-quantize" --allow-requantize "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "$file" \
        "${name#smollm2-}" "$THREADS" >/dev/null 2>&1 ;;
    synthetic-*-F32)
      arch=${name#synthetic-}; arch=${arch%-F32}
      preset=$arch-tiny; [ "$arch" = llama ] && preset=tiny
      file=$tmp/$name.gguf
      # The phi3 file loads in llama.cpp as written: its vocabulary carries <|endoftext|>, which this
      # llama.cpp requires of any vocabulary whose general.name holds "phi3".
      "$MKMODEL" --preset "$preset" --type f32 --out "$file" >/dev/null ;;
    *) echo "logits-vs-reference: unknown file $name" >&2; exit 2 ;;
  esac
  echo "== $name ($file)" >&2
  python3 bench/logits_vs_reference.py --teacher-logits "$teacher" --llama-logits bench/peers/build/llama_logits \
    --llama-server "$bin/llama-server" --threads "$THREADS" "${flags[@]}" --json "$RESULTS/$name.json" "$file"
done
