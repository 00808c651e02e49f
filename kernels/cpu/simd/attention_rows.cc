// Paged attention's softmax and value pass over the keys of one (token, head), one instruction-set
// level. Both are element-wise, so the vector paths are the portable loops' operations several lanes
// at a time:
// ExpScores, per row: s[j] = s[j] · scale; max = the largest s[j] (a NaN never wins);
//   s[j] = PortableExpF(s[j] − max) (exp_lanes.h); the row's Σ s[j] in 16 lanes from +0, lane l adding
//   s[l], s[l + 16], ... in order, then Fold16 (canonical_sum.h), as the dot products sum.
// AccumulateRows, per output o: out[o][i] = fma(w[o][r], v[r · v_stride + i], out[o][i]) for r in order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/exp_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

namespace {

// The largest of s[0, n) (a NaN never wins; -inf for none). The lanes keep their own maxima: max is
// order-free but for the sign of a zero, and exp(s − ±0) is the same. The scores are scaled after: for a
// scale > 0, rounding s · scale is monotonic, so the largest scaled score is this max · scale, and the row is
// read once here and written once by the exp pass (one pass wrote the scaled scores back before).
float RowMax(const float* s, int64_t n) {
  ExpLanes lane_max = ExpLanes{} - INFINITY;
  int64_t j = 0;
  for (; j + kExpLanes <= n; j += kExpLanes) {
    ExpLanes v;
    std::memcpy(&v, s + j, sizeof v);
    lane_max = v > lane_max ? v : lane_max;
  }
  float max = -INFINITY;
  for (int64_t l = 0; l < kExpLanes; ++l) {
    const float m = reinterpret_cast<const float*>(&lane_max)[l];
    max = m > max ? m : max;
  }
  for (; j < n; ++j) max = s[j] > max ? s[j] : max;
  return max;
}

// s[j] = PortableExpF(s[j] · scale − max) over the row, returning its sum in the canonical 16 lanes: the level's
// lanes hold kExpLanes of them, so the row's chunks take turns among 16 / kExpLanes accumulators (one on
// AVX-512, two on AVX2, sixteen single floats on the portable level). A tail's lanes past the row add +0,
// which changes no sum of exps (never −0). (One f32 add per element in j order was most of this function's
// time: 4.4 % of a SmolLM2 pp512 at two threads.)
float ExpRowSum(float* s, int64_t n, float scale, float max) {
  constexpr int64_t kAccs = 16 / kExpLanes;
  ExpLanes acc[kAccs];
  for (ExpLanes& a : acc) a = ExpLanes{} + 0.0f;
  int64_t j = 0, chunk = 0;
  for (; j + kExpLanes <= n; j += kExpLanes, ++chunk) {
    ExpLanes v;
    std::memcpy(&v, s + j, sizeof v);
    v = ExpOfLanes(v * scale - max);
    std::memcpy(s + j, &v, sizeof v);
    acc[chunk % kAccs] += v;
  }
  if (j < n) {
    float tail[kExpLanes] = {};
    std::memcpy(tail, s + j, (n - j) * sizeof(float));
    ExpLanes v;
    std::memcpy(&v, tail, sizeof v);
    v = ExpOfLanes(v * scale - max);
    std::memcpy(tail, &v, sizeof v);
    std::memcpy(s + j, tail, (n - j) * sizeof(float));
    std::fill(tail + (n - j), tail + kExpLanes, 0.0f);
    std::memcpy(&v, tail, sizeof v);
    acc[chunk % kAccs] += v;
  }
  float lanes[16];
  std::memcpy(lanes, acc, sizeof lanes);
  return Fold16(lanes);
}

// Outputs o < O at once, columns [i, i + W · C) of each: acc = fma(w[o][r], v[r · v_stride + ...], acc) for every
// row r in order. The O · C accumulators are independent chains: the outputs share each row's loads, and with
// O · C ≥ 8 the FMA units never wait on a chain (4 zmm cover a 64-element head, so AVX-512 takes a group's
// heads together; AVX2 has 8 ymm per head and 16 registers, so one head).
#if defined(__AVX2__) && defined(__FMA__)
template <int W>
struct FloatLanes;
template <>
struct FloatLanes<8> {
  using Vec = __m256;
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec Fma(float w, Vec v, Vec acc) { return _mm256_fmadd_ps(_mm256_set1_ps(w), v, acc); }
};
#if defined(__AVX512F__)
template <>
struct FloatLanes<16> {
  using Vec = __m512;
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec Fma(float w, Vec v, Vec acc) { return _mm512_fmadd_ps(_mm512_set1_ps(w), v, acc); }
};
#endif

template <int W, int C, int O>
[[gnu::always_inline]] inline void AccumulateOutputs(const float* const* w, const float* v, int64_t v_stride,
                                                     int64_t num_rows, float* const* out, int64_t i) {
  using L = FloatLanes<W>;
  typename L::Vec acc[O][C];
  for (int o = 0; o < O; ++o) {
    for (int c = 0; c < C; ++c) acc[o][c] = L::Load(out[o] + i + W * c);
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int c = 0; c < C; ++c) {
      const typename L::Vec vr = L::Load(v + r * v_stride + i + W * c);
      for (int o = 0; o < O; ++o) acc[o][c] = L::Fma(w[o][r], vr, acc[o][c]);
    }
  }
  for (int o = 0; o < O; ++o) {
    for (int c = 0; c < C; ++c) L::Store(out[o] + i + W * c, acc[o][c]);
  }
}

// Columns [i, i + W · C) of every output: O at a time, then the fewer left as one group.
template <int W, int C, int O>
void AccumulateColumns(const float* const* w, int64_t num_outputs, const float* v, int64_t v_stride,
                       int64_t num_rows, float* const* out, int64_t i) {
  int64_t o = 0;
  for (; o + O <= num_outputs; o += O) AccumulateOutputs<W, C, O>(w + o, v, v_stride, num_rows, out + o, i);
  if constexpr (O > 1) {
    if (o < num_outputs) AccumulateColumns<W, C, O - 1>(w + o, num_outputs - o, v, v_stride, num_rows, out + o, i);
  }
}
#endif

}  // namespace

void ExpScores(float* s, const int64_t* lengths, int64_t rows, float scale, float* sums) {
  for (int64_t r = 0; r < rows; s += lengths[r], ++r) {
    sums[r] = ExpRowSum(s, lengths[r], scale, RowMax(s, lengths[r]) * scale);
  }
}

void AccumulateRows(const float* const* w, int64_t num_outputs, const float* v, int64_t v_stride, int64_t num_rows,
                    int64_t n, float* const* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 64 <= n; i += 64) AccumulateColumns<16, 4, 4>(w, num_outputs, v, v_stride, num_rows, out, i);
  for (; i + 16 <= n; i += 16) AccumulateColumns<16, 1, 8>(w, num_outputs, v, v_stride, num_rows, out, i);
#endif
#if defined(__AVX2__) && defined(__FMA__)
  for (; i + 64 <= n; i += 64) AccumulateColumns<8, 8, 1>(w, num_outputs, v, v_stride, num_rows, out, i);
  for (; i + 8 <= n; i += 8) AccumulateColumns<8, 1, 8>(w, num_outputs, v, v_stride, num_rows, out, i);
#endif
  for (int64_t o = 0; o < num_outputs; ++o) {
    for (int64_t e = i; e < n; ++e) {
      float acc = out[o][e];
      for (int64_t r = 0; r < num_rows; ++r) acc = std::fma(w[o][r], v[r * v_stride + e], acc);
      out[o][e] = acc;
    }
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
