#!/bin/bash
# Interleaved A/B of tpserve-bench-attention (old = HEAD before the change, new = after): prefill 512 over a
# 512-position context and a batch-1 decode over 512 and 4096, at 1 and 2 threads.
for r in 1 2 3; do
  for t in 1 2; do
    for e in /tmp/attn_old /tmp/attn_new; do
      echo "== round $r threads $t $(basename $e)"
      TPSERVE_THREADS=$t $e --quick --context 512 --prefill 512 --kv-dtype f32 2>&1 | grep -E "prefill"
      TPSERVE_THREADS=$t $e --quick --context 512,4096 --kv-dtype f32 2>&1 | grep -E "B=1 "
    done
  done
done
