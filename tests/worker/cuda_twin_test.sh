#!/bin/bash
# The CPU binaries of a CUDA build load no CUDA library, and `--device cuda` on them reaches the CUDA
# executor through their -cuda twin (worker/device_executor.h): ldd of tpserve-run and tpserve-worker
# names no CUDA, cuBLAS or NCCL library; `tpserve-run --device cuda` fails (here: no usable device, or,
# on a GPU host, the missing model) but never with the CPU binary's own "no CUDA backend". Exit 0 when
# both hold, 1 otherwise.
#   tests/worker/cuda_twin_test.sh TPSERVE_RUN TPSERVE_WORKER
set -uo pipefail
run=$1
worker=$2
status=0
for bin in "$run" "$worker"; do
  if ldd "$bin" | grep -E "libcuda|libcublas|libnccl"; then
    echo "cuda-twin-test: $(basename "$bin") loads CUDA libraries"
    status=1
  fi
  [[ -x "$bin-cuda" ]] || { echo "cuda-twin-test: no $bin-cuda"; status=1; }
done
out=$("$run" --model /nonexistent.gguf --prompt x --max-tokens 1 --device cuda 2>&1)
rc=$?
echo "tpserve-run --device cuda: exit $rc: $out"
if [[ $rc == 0 || "$out" == *"no CUDA backend"* ]]; then
  echo "cuda-twin-test: --device cuda did not reach the CUDA twin"
  status=1
fi
[[ $status == 0 ]] && echo "cuda-twin-test: CPU binaries free of CUDA, --device cuda runs the twin"
exit $status
