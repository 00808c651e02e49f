// Paged attention's softmax and value pass over the keys of one (token, head), one instruction-set
// level. Both are element-wise, so the vector paths are the portable loops' operations several lanes
// at a time:
// ExpScores, per row: s[j] = s[j] · scale; max = the largest s[j] (a NaN never wins);
//   s[j] = PortableExpF(s[j] − max) (exp_lanes.h); the row's Σ s[j] summed in j order, one f32 add at a time.
// AccumulateRows: out[i] += w[r] · v[r · v_stride + i] for r in order, the product rounded before the add.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/simd/exp_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

namespace {

// Row s[0, n): s[j] · scale in place, returning the largest (a NaN never wins; -inf for none). The
// lanes keep their own maxima: max is order-free but for the sign of a zero, and exp(s − ±0) is the same.
float ScaleAndMax(float* s, int64_t n, float scale) {
  ExpLanes lane_max = ExpLanes{} - INFINITY;
  int64_t j = 0;
  for (; j + kExpLanes <= n; j += kExpLanes) {
    ExpLanes v;
    std::memcpy(&v, s + j, sizeof v);
    v = v * scale;
    std::memcpy(s + j, &v, sizeof v);
    lane_max = v > lane_max ? v : lane_max;
  }
  float max = -INFINITY;
  for (int64_t l = 0; l < kExpLanes; ++l) {
    const float m = reinterpret_cast<const float*>(&lane_max)[l];
    max = m > max ? m : max;
  }
  for (; j < n; ++j) {
    s[j] *= scale;
    max = s[j] > max ? s[j] : max;
  }
  return max;
}

// s[j] = PortableExpF(s[j] − max) over the row.
void ExpRow(float* s, int64_t n, float max) {
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
}

// The sums of R rows n apart, each in j order one add at a time; the R chains are independent, so
// interleaving them hides the add's latency.
template <int R>
void SumRows(const float* s, int64_t n, float* sums) {
  float acc[R] = {};
  for (int64_t j = 0; j < n; ++j) {
    for (int r = 0; r < R; ++r) acc[r] += s[r * n + j];
  }
  for (int r = 0; r < R; ++r) sums[r] = acc[r];
}

}  // namespace

void ExpScores(float* s, int64_t rows, int64_t n, float scale, float* sums) {
  for (int64_t r = 0; r < rows; ++r) ExpRow(s + r * n, n, ScaleAndMax(s + r * n, n, scale));
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) SumRows<4>(s + r * n, n, sums + r);
  switch (rows - r) {
    case 3: SumRows<3>(s + r * n, n, sums + r); break;
    case 2: SumRows<2>(s + r * n, n, sums + r); break;
    case 1: SumRows<1>(s + r * n, n, sums + r); break;
    default: break;
  }
}

void AccumulateRows(const float* w, const float* v, int64_t v_stride, int64_t num_rows, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // C · 16 outputs in C registers across all the rows, one chain of adds each (a 64-element head: 4).
  auto outputs512 = [&](auto chains) __attribute__((always_inline)) {
    constexpr int C = decltype(chains)::value;
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_loadu_ps(out + i + 16 * c);
    for (int64_t r = 0; r < num_rows; ++r) {
      const __m512 wr = _mm512_set1_ps(w[r]);
      const float* vr = v + r * v_stride + i;
      for (int c = 0; c < C; ++c) acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(wr, _mm512_loadu_ps(vr + 16 * c)));
    }
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + i + 16 * c, acc[c]);
    i += 16 * C;
  };
  while (i + 128 <= n) outputs512(std::integral_constant<int, 8>{});
  while (i + 64 <= n) outputs512(std::integral_constant<int, 4>{});
#endif
#if defined(__AVX2__)
  // C · 8 outputs in C registers across all the rows: each register's adds form one chain through the
  // rows, so 8 chains (64 outputs, a whole 64-element head) keep the adders busy where 4 waited on them.
  auto outputs = [&](auto chains) __attribute__((always_inline)) {
    constexpr int C = decltype(chains)::value;
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_loadu_ps(out + i + 8 * c);
    for (int64_t r = 0; r < num_rows; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* vr = v + r * v_stride + i;
      for (int c = 0; c < C; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(wr, _mm256_loadu_ps(vr + 8 * c)));
    }
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + i + 8 * c, acc[c]);
    i += 8 * C;
  };
  while (i + 64 <= n) outputs(std::integral_constant<int, 8>{});
  while (i + 32 <= n) outputs(std::integral_constant<int, 4>{});
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
