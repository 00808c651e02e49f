#pragma once

#include <cstdint>

namespace tpserve {

// out[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) * weight[:]; x and out may alias.
// x: [T, dim], weight: [dim], out: [T, dim]
void RmsNorm(const float* x, const float* weight, int64_t num_tokens, int64_t dim, float eps, float* out);

}  // namespace tpserve
