#!/bin/bash
# Interleaved pp512 at 2 threads over the whole stop: tpserve-bench-engine at the stop's start (9e1a4f0, eng_old)
# and at its end (eng_end), beside llama.cpp's llama-bench, on four SmolLM2 types.
L=third_party/llama.cpp/build/bin
for r in 1 2 3; do
  for f in models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/tpserve-bench/smollm2-Q8_0.gguf /tmp/tpserve-bench/smollm2-F16.gguf \
           /tmp/tpserve-bench/smollm2-BF16.gguf; do
    for e in /tmp/eng_old /tmp/eng_end; do
      printf "round %s %s %s " $r $(basename $f) $(basename $e)
      $e --model $f --threads 2 --batches 1 --prompt 512 --context 512 --decode-steps 2 2>&1 | grep "prefill pp512" | sed 's/.*pp512: \([0-9.]*\) tok.*-> \([0-9]*%\).*/\1 \2/'
    done
    printf "round %s %s llama.cpp " $r $(basename $f)
    LD_LIBRARY_PATH=$L $L/llama-bench -m $f -t 2 -p 512 -n 0 -r 2 -o csv 2>/dev/null | tail -1 | awk -F, '{print $(NF-1)}' | tr -d '"'
  done
done
