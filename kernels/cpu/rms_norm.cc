#include "kernels/cpu/rms_norm.h"

#include <cmath>

namespace tpserve {
namespace {

// Σ x[i]² in f64 (each square exact: 48 bits of a float's 24-bit significand squared) in 32 lanes: lane l
// adds the squares of i = l, l + 32, ... in order, then the lanes fold pairwise (lane l + 16 into l, then
// + 8, + 4, + 2, + 1). A fixed order, so the same bits whatever the batch or the build machine; 32
// independent chains, where one chain in index order waited an add's latency per element (2.7 % of a
// SmolLM2 pp512 at two threads).
double SumOfSquares(const float* x, int64_t dim) {
  constexpr int64_t kLanes = 32;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
  }
  for (int64_t l = 0; i + l < dim; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
  for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t num_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * dim;
    float* ot = out + t * dim;
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(SumOfSquares(xt, dim) / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) ot[i] = xt[i] * inv_rms * weight[i];
  }
}

}  // namespace tpserve
