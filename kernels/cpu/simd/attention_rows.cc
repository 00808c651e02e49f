// Paged attention's softmax and value pass over the keys of one (token, head), one instruction-set
// level. Both are element-wise, so the vector paths are the portable loops' operations several lanes
// at a time:
// ExpScores: s[j] = s[j] · scale; max = the largest s[j] (a NaN never wins); s[j] = PortableExpF(s[j] − max)
//   (kernels/cpu/portable_math.h: its IEEE double steps, written out here so that no level calls the
//   shared inline function); returns Σ s[j] summed in j order, one f32 add at a time.
// AccumulateRows: out[i] += w[r] · v[r · v_stride + i] for r in order, the product rounded before the add.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kLn2 = 6.93147180559945286227e-01;
constexpr double kShift = 0x1.8p52;  // adding it rounds to an integer held in the low mantissa bits
constexpr double kExpHigh = 89.0, kExpLow = -104.0;
constexpr double kTaylor[8] = {1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};

#if defined(__AVX2__)
// PortableExpF on four lanes.
inline __m128 Exp4(__m128 x) {
  __m256d xd = _mm256_cvtps_pd(x);
  xd = _mm256_min_pd(_mm256_set1_pd(kExpHigh), xd);  // x > 89 ? 89 : x (a NaN stays)
  xd = _mm256_max_pd(_mm256_set1_pd(kExpLow), xd);   // x < -104 ? -104 : x
  const __m256d shifted = _mm256_add_pd(_mm256_mul_pd(xd, _mm256_set1_pd(kInvLn2)), _mm256_set1_pd(kShift));
  const __m256d kd = _mm256_sub_pd(shifted, _mm256_set1_pd(kShift));
  const __m256d r = _mm256_sub_pd(xd, _mm256_mul_pd(kd, _mm256_set1_pd(kLn2)));
  __m256d p = _mm256_set1_pd(kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kTaylor[i]));
  const __m256i k = _mm256_sub_epi64(_mm256_castpd_si256(shifted), _mm256_castpd_si256(_mm256_set1_pd(kShift)));
  const __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k, _mm256_set1_epi64x(1023)), 52));
  return _mm256_cvtpd_ps(_mm256_mul_pd(p, scale));
}
#else
inline float Exp1(float x) {
  double xd = static_cast<double>(x);
  xd = xd > kExpHigh ? kExpHigh : xd;
  xd = xd < kExpLow ? kExpLow : xd;
  const double shifted = xd * kInvLn2 + kShift;
  const double kd = shifted - kShift;
  const double r = xd - kd * kLn2;
  double p = kTaylor[0];
  for (int i = 1; i < 8; ++i) p = p * r + kTaylor[i];
  const int64_t k = __builtin_bit_cast(int64_t, shifted) - __builtin_bit_cast(int64_t, kShift);
  const double scale = __builtin_bit_cast(double, static_cast<uint64_t>(k + 1023) << 52);
  return static_cast<float>(p * scale);
}
#endif

}  // namespace

float ExpScores(float* s, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    s[j] *= scale;
    max = s[j] > max ? s[j] : max;
  }
#if defined(__AVX2__)
  const __m128 vmax = _mm_set1_ps(max);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) _mm_storeu_ps(s + j, Exp4(_mm_sub_ps(_mm_loadu_ps(s + j), vmax)));
  if (j < n) {
    float tail[4] = {};
    std::memcpy(tail, s + j, (n - j) * sizeof(float));
    _mm_storeu_ps(tail, Exp4(_mm_sub_ps(_mm_loadu_ps(tail), vmax)));
    std::memcpy(s + j, tail, (n - j) * sizeof(float));
  }
#else
  for (int64_t j = 0; j < n; ++j) s[j] = Exp1(s[j] - max);
#endif
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
