#pragma once

#include <cstdint>

#include "common/rope_layout.h"

namespace tpserve {

// Rotates each head of x in place by angle positions[t] * inv_freq[i] for pair i.
// x: [T, num_heads, head_dim], positions: [T], inv_freq: [head_dim / 2]
void ApplyRope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
               const float* inv_freq, RopeLayout layout);

}  // namespace tpserve
