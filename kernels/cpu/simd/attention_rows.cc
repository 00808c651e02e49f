// Paged attention's softmax and value pass over the keys of one (token, head), one instruction-set
// level. Both are element-wise, so the vector paths are the portable loops' operations several lanes
// at a time:
// ExpScores: s[j] = s[j] · scale; max = the largest s[j] (a NaN never wins); s[j] = PortableExpF(s[j] − max)
//   (exp_lanes.h); returns Σ s[j] summed in j order, one f32 add at a time.
// AccumulateRows: out[i] += w[r] · v[r · v_stride + i] for r in order, the product rounded before the add.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/exp_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

float ExpScores(float* s, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    s[j] *= scale;
    max = s[j] > max ? s[j] : max;
  }
  auto lanes = [&](float* x) {
    ExpLanes v;
    std::memcpy(&v, x, sizeof v);
    v = ExpOfLanes(v - max);
    std::memcpy(x, &v, sizeof v);
  };
  int64_t j = 0;
  for (; j + kExpLanes <= n; j += kExpLanes) lanes(s + j);
  if (j < n) {
    float tail[kExpLanes] = {};
    std::memcpy(tail, s + j, (n - j) * sizeof(float));
    lanes(tail);
    std::memcpy(s + j, tail, (n - j) * sizeof(float));
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  return sum;
}

void AccumulateRows(const float* w, const float* v, int64_t v_stride, int64_t num_rows, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX2__)
  // 32 outputs in four registers across all the rows.
  for (; i + 32 <= n; i += 32) {
    __m256 acc[4];
    for (int c = 0; c < 4; ++c) acc[c] = _mm256_loadu_ps(out + i + 8 * c);
    for (int64_t r = 0; r < num_rows; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* vr = v + r * v_stride + i;
      for (int c = 0; c < 4; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(wr, _mm256_loadu_ps(vr + 8 * c)));
    }
    for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + i + 8 * c, acc[c]);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_loadu_ps(out + i);
    for (int64_t r = 0; r < num_rows; ++r) {
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(v + r * v_stride + i)));
    }
    _mm256_storeu_ps(out + i, acc);
  }
#endif
  for (; i < n; ++i) {
    float acc = out[i];
    for (int64_t r = 0; r < num_rows; ++r) acc += w[r] * v[r * v_stride + i];
    out[i] = acc;
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
