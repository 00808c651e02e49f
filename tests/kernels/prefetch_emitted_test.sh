#!/bin/bash
# The quantised matmul tiles of the SIMD levels issue software prefetches (kernels/cpu/simd/quant_unpack.h,
# TilePrefetch). GCC 12 silently deleted every _mm_prefetch they once made: a helper whose only effect is a
# prefetch looks free of side effects, and its calls go before they are inlined. Decode then ran up to 2.8x
# slower on short rows with nothing wrong in any answer, so only the object code shows it.
# Exit 0 when each object given holds prefetch instructions, 1 otherwise.
#   tests/kernels/prefetch_emitted_test.sh MATMUL_QUANT_OBJECT...
set -uo pipefail
status=0
for obj in "$@"; do
  count=$(objdump -d "$obj" | grep -c prefetcht0)
  echo "prefetch-emitted-test: $count prefetcht0 in $obj"
  [[ $count -gt 0 ]] || status=1
done
exit $status
