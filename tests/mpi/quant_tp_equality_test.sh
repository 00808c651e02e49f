#!/bin/bash
# tests/testing/ids_equality_test.sh tp on a synthetic Q4_K_M model written by tpserve-mkmodel (Q4_K with Q6_K attn_v,
# ffn_down and output in the layers llama-quantize gives more bits): the same ids at --tp 2, 3 and 4 as at
# --tp 1. 16 heads of 64 make attn_output 4 super-blocks wide and ffn_down is 11, so every degree
# splits both on super-blocks (TP 3: heads 8/4/4, FFN 4/4/3 super-blocks).
#   tests/mpi/quant_tp_equality_test.sh TPSERVE_MKMODEL TPSERVE_RUN
set -uo pipefail
mkmodel=$1
run=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mkmodel" --out "$dir/q4_k_m.gguf" --layers 2 --hidden 1024 --heads 16 --kv-heads 4 --head-dim 64 --ffn 2816 \
  --vocab 8192 --type q4_k_m --seed 3 || exit 1
"$(dirname "$0")/../testing/ids_equality_test.sh" tp "$run" "$dir/q4_k_m.gguf"
