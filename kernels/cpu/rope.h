#pragma once

#include <cstdint>

#include "common/rope_layout.h"

namespace tpserve {

// cos and sin of angle positions[t] * inv_freq[i] for each token t and pair i < half: [T, half] each. The
// angle in f64, its cos and sin by PortableSinCos, each rounded to f32.
void RopeAngles(const int32_t* positions, int64_t num_tokens, const float* inv_freq, int64_t half, float* cos_t,
                float* sin_t);

// Rotates each head of x in place by its token's angles (RopeAngles' cos_t and sin_t, [T, head_dim / 2]).
// x: [T, num_heads, head_dim]
void RotateHeads(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, const float* cos_t,
                 const float* sin_t, RopeLayout layout);

// RopeAngles, then RotateHeads. x: [T, num_heads, head_dim], positions: [T], inv_freq: [head_dim / 2]
void ApplyRope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
               const float* inv_freq, RopeLayout layout);

}  // namespace tpserve
