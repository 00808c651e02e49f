#include "kernels/cpu/rms_norm.h"

#include <cmath>

namespace tpserve {

void RmsNorm(const float* x, const float* weight, int64_t num_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * dim;
    float* ot = out + t * dim;
    // The sum of squares runs in f64 in index order: accurate, and the same whatever the batch.
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xt[i]) * xt[i];
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) ot[i] = xt[i] * inv_rms * weight[i];
  }
}

}  // namespace tpserve
