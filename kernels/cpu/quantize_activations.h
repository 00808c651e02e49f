// Per-token quantisation of activations to 8-bit blocks, the left operand of the integer dot
// products that multiply by quantised weights (Q8_0, Q4_0, Q4_1).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace tpserve {

// One block of 32 activations: x ≈ d * qs[i]. sum = d * Σ qs[i] serves Q4_1's minimum term.
// Unlike ggml's Q8_0/Q8_1 the scale stays f32: it never leaves the process.
struct BlockQ8Act {
  float d;
  float sum;
  int8_t qs[kQuantBlock];
};
static_assert(sizeof(BlockQ8Act) == 40);

// Quantises one row x[n] (n a multiple of 32) into dst[n / 32] with round-to-nearest on
// d = max|x| / 127. Depends on that row alone, so it is batch invariant.
void QuantizeActivationRow(const float* x, int64_t n, BlockQ8Act* dst);

}  // namespace tpserve
