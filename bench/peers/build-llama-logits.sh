#!/usr/bin/env bash
# Builds bench/peers/llama_logits (llama.cpp's teacher-forced logits along an id sequence, the peer of
# tpserve-teacher-logits in bench/logits_vs_reference.py) with g++ against the libllama.so that
# bench/peers/build-llama-cpp.sh built, -Wall -Wextra -Werror; the binary finds the library by rpath.
#   bench/peers/build-llama-logits.sh [OUT]     (default OUT: bench/peers/build/llama_logits)
# LLAMA_CPP_DIR overrides third_party/llama.cpp (a worktree without the build can point at the main one's).
set -euo pipefail
cd "$(dirname "$0")/../.."
llama=$(realpath "${LLAMA_CPP_DIR:-third_party/llama.cpp}")
out=${1:-bench/peers/build/llama_logits}
[ -f "$llama/build/bin/libllama.so" ] || { echo "no $llama/build/bin/libllama.so: run bench/peers/build-llama-cpp.sh" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$llama/include" -I"$llama/ggml/include" bench/peers/llama_logits.cc \
  -L"$llama/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$llama/build/bin" -o "$out"
echo "built $out"
