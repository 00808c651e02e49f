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

// out[0, W · C) += w[r] · v[r · v_stride + ...] for every row r in order, each product rounded before its add
// (-ffp-contract=off keeps them apart): C registers of W floats, one chain of adds each, so C chains are in
// flight through the rows (8 ymm or 4 zmm cover a 64-element head).
template <int W>
struct FloatLanes;  // W floats in one register (a vector_size on a dependent alias is dropped by GCC)
template <>
struct FloatLanes<8> {
  using Type = float __attribute__((vector_size(32)));
};
template <>
struct FloatLanes<16> {
  using Type = float __attribute__((vector_size(64)));
};

template <int W, int C>
[[gnu::always_inline]] inline void AccumulateOutputs(const float* w, const float* v, int64_t v_stride, int64_t num_rows,
                                                     float* out) {
  using Vec = typename FloatLanes<W>::Type;
  Vec acc[C];
  for (int c = 0; c < C; ++c) std::memcpy(&acc[c], out + W * c, sizeof(Vec));
  for (int64_t r = 0; r < num_rows; ++r) {
    const Vec wr = Vec{} + w[r];
    for (int c = 0; c < C; ++c) {
      Vec vr;
      std::memcpy(&vr, v + r * v_stride + W * c, sizeof(Vec));
      acc[c] = acc[c] + wr * vr;
    }
  }
  for (int c = 0; c < C; ++c) std::memcpy(out + W * c, &acc[c], sizeof(Vec));
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
#if defined(__AVX2__)
  auto outputs = [&](auto width, auto chains) __attribute__((always_inline)) {
    AccumulateOutputs<decltype(width)::value, decltype(chains)::value>(w, v + i, v_stride, num_rows, out + i);
    i += decltype(width)::value * decltype(chains)::value;
  };
  using std::integral_constant;
#endif
#if defined(__AVX512F__)
  while (i + 128 <= n) outputs(integral_constant<int, 16>{}, integral_constant<int, 8>{});
  while (i + 64 <= n) outputs(integral_constant<int, 16>{}, integral_constant<int, 4>{});
#endif
#if defined(__AVX2__)
  while (i + 64 <= n) outputs(integral_constant<int, 8>{}, integral_constant<int, 8>{});
  while (i + 32 <= n) outputs(integral_constant<int, 8>{}, integral_constant<int, 4>{});
  while (i + 8 <= n) outputs(integral_constant<int, 8>{}, integral_constant<int, 1>{});
#endif
  for (; i < n; ++i) {
    float acc = out[i];
    for (int64_t r = 0; r < num_rows; ++r) acc += w[r] * v[r * v_stride + i];
    out[i] = acc;
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
