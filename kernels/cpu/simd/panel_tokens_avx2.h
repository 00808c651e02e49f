// Internal to quant_panel.h, the AVX2 level: the passes of tokens over an unpacked panel
// (quant_panel_block.h), a field of 8 rows in one ymm, the panel's two row halves one after the other.
// AVX2 has no VNNI: group g's 8 rows are maddubs (the token's 4 shifted activations, broadcast, as u8 ×
// the rows' values as s8) into int16 pairs; a run of groups adds its pairs in int16 (no sum can leave
// int16: kRunGroups) before one madd with ones widens it to int32, plus the correction −128 · Σ w.
// Q8_0's values (|w| up to 128) would saturate a pair beside shifted activations: it dots |w| with the
// unshifted activations carrying w's sign (2 · 128 · 127 < 2^15), one group per run, no correction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_panel_block.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every quantised type takes panels here.
template <class Out>
constexpr bool HasPanel(DType) {
  return true;
}

// The fewest tokens that take the panels here: below, the row quads take the batch (quant_row_quads.h's
// QuadTokenRows). SmolLM2 Q4_1 decode at 2 threads (TPSERVE_ISA=avx2 on the AVX-512 host), tok/s, panels →
// quads: batch 16 446-452 → 611-619, 24 492-519 → 656-660, 32 544-550 → 674-675.
inline constexpr int64_t kQuantPanelMinTokens = 33;

// The activations as the panel dots them: a + 128, but Q8_0's as they are (for the sign trick).
constexpr bool ShiftsActivations(DType type) { return type != DType::kQ8_0; }

// The largest |w| of a type's values as the panel holds them (signed, after any bias).
constexpr int MaxAbsValue(DType type) {
  switch (type) {
    case DType::kQ4_0: return 8;
    case DType::kQ4_1: case DType::kQ4_K: return 15;
    case DType::kQ5_0: return 16;
    case DType::kQ5_1: case DType::kQ5_K: return 31;
    case DType::kQ2_K: return 3;
    case DType::kQ3_K: return 4;
    case DType::kQ6_K: return 32;
    default: return 128;
  }
}

// Groups whose maddubs pairs add up in int16: each pair is at most 2 · 255 · max|w| in magnitude, so
// k of them stay within 32767 while k · 510 · max|w| does (Q4_0: 8, Q4_1 and Q5_0: 4, Q5_1 and Q6_K: 2).
// A power of two dividing the block's 8 groups, and at most a half's 4 for the half-scale types, whose
// halves are scaled apart.
template <DType kType>
constexpr int kRunGroups = [] {
  int k = HasHalfScales(kType) ? 4 : 8;
  while (k > 1 && k * 510 * MaxAbsValue(kType) > 32767) k /= 2;
  return k;
}();

// Rows 8·half..8·half+7 of a panel field.
inline __m256i Rows8(const int32_t* field, int half) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(field + 8 * half));
}
inline __m256i Rows8(const int8_t* field, int half) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(field + 32 * half));
}
inline __m256 Rows8(const float* field, int half) { return _mm256_load_ps(field + 8 * half); }

// Rows [8·half, num_rows) of the half's 8 results in v, at most 8, to y.
template <class T, class V>
inline void StoreRows(const V& v, int half, int num_rows, T* y) {
  static_assert(sizeof(V) == 8 * sizeof(T));
  T lanes[8];
  std::memcpy(lanes, &v, sizeof lanes);
  const int n = std::min(8, num_rows - 8 * half);
  std::memcpy(y + 8 * half, lanes, n * sizeof(T));
}

// Block pb's exact totals T_b of the half's 8 rows against each of NT tokens (and Q2_K's M_b).
template <DType kType, int NT>
inline void HalfTotals(const PanelBlock& pb, int half, const PanelActivation* const (&a)[NT], int64_t b,
                       __m256i (&total)[NT], __m256i (&min_total)[NT]) {
  constexpr int kRun = kRunGroups<kType>;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sums[NT][2];  // per half of the block (the half-scale types), else all in [0]
  for (int t = 0; t < NT; ++t) {
    if constexpr (HasHalfScales(kType)) {
      sums[t][0] = Rows8(pb.half_corr[0], half);
      sums[t][1] = Rows8(pb.half_corr[1], half);
    } else {
      sums[t][0] = ShiftsActivations(kType) ? Rows8(pb.corr, half) : _mm256_setzero_si256();
    }
  }
#pragma GCC unroll 8
  for (int g0 = 0; g0 < 8; g0 += kRun) {
    __m256i run[NT];
#pragma GCC unroll 8
    for (int g = g0; g < g0 + kRun; ++g) {
      const __m256i q = Rows8(pb.q[g], half);
      const __m256i magnitude = _mm256_sign_epi8(q, q);  // Q8_0: |w| as u8 (−128 reads as 128)
      for (int t = 0; t < NT; ++t) {
        const __m256i act = _mm256_set1_epi32(ActivationBytes(a[t][b], g));
        const __m256i pairs = ShiftsActivations(kType) ? _mm256_maddubs_epi16(act, q)
                                                       : _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(act, q));
        run[t] = g == g0 ? pairs : _mm256_add_epi16(run[t], pairs);
      }
    }
    const int h = HasHalfScales(kType) ? g0 / 4 : 0;
    for (int t = 0; t < NT; ++t) sums[t][h] = _mm256_add_epi32(sums[t][h], _mm256_madd_epi16(run[t], ones));
  }
  for (int t = 0; t < NT; ++t) {
    if constexpr (HasHalfScales(kType)) {
      total[t] = _mm256_add_epi32(_mm256_mullo_epi32(sums[t][0], Rows8(pb.scale[0], half)),
                                  _mm256_mullo_epi32(sums[t][1], Rows8(pb.scale[1], half)));
    } else {
      total[t] = sums[t][0];
    }
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      const PanelActivation& at = a[t][b];
      min_total[t] = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_set1_epi32(at.half_sums[0]), Rows8(pb.min[0], half)),
                                      _mm256_mullo_epi32(_mm256_set1_epi32(at.half_sums[1]), Rows8(pb.min[1], half)));
    }
  }
}

// MatMul's sums of one row half: per token the f32 accumulator and the offset sum beside it.
template <DType kType, int NT>
struct FloatPanelSums {
  FloatPanelSums() {
    for (int t = 0; t < NT; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  }
  void Add(int t, const PanelBlock& pb, int half, __m256i total, __m256i min_total, const PanelActivation& xa) {
    const __m256 ad = _mm256_set1_ps(xa.d);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(Rows8(pb.d, half), ad), acc[t]);
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_total), _mm256_mul_ps(Rows8(pb.neg_dmin, half), ad), acc[t]);
    }
    if constexpr (MinKindOf(kType) == MinKind::kOffset) {
      acc_min[t] = _mm256_add_ps(acc_min[t], _mm256_mul_ps(Rows8(pb.m, half), _mm256_set1_ps(xa.sum)));
    }
  }
  void Store(int t, int half, int num_rows, float* y) const {
    StoreRows(_mm256_add_ps(acc[t], acc_min[t]), half, num_rows, y);
  }
  __m256 acc[NT], acc_min[NT];
};

// MatMulFixedPoint's sums of one row half: per token and block the 8 rows' terms, rounded into int64
// rows 0..3 and 4..7 of the half.
template <DType kType, int NT>
struct FixedPanelSums {
  FixedPanelSums() {
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
  }
  void Add(int t, const PanelBlock& pb, int half, __m256i total, __m256i min_total, const PanelActivation& xa) {
    __m256 terms = _mm256_mul_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(Rows8(pb.d, half), _mm256_set1_ps(xa.d)));
    if constexpr (MinKindOf(kType) == MinKind::kOffset) {
      terms = _mm256_add_ps(terms, _mm256_mul_ps(Rows8(pb.m, half), _mm256_set1_ps(xa.sum)));
    }
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      terms = _mm256_add_ps(terms, _mm256_mul_ps(_mm256_cvtepi32_ps(min_total),
                                                 _mm256_mul_ps(Rows8(pb.neg_dmin, half), _mm256_set1_ps(xa.d))));
    }
    acc[t][0] = _mm256_add_epi64(acc[t][0], RoundToFixed4(_mm256_castps256_ps128(terms)));
    acc[t][1] = _mm256_add_epi64(acc[t][1], RoundToFixed4(_mm256_extractf128_ps(terms, 1)));
  }
  void Store(int t, int half, int num_rows, int64_t* y) const { StoreRows(acc[t], half, num_rows, y); }
  __m256i acc[NT][2];
};

// NT tokens over each row half of the panel, block after block.
template <DType kType, class Sums, int NT, class Out>
void PanelPass(const PanelBlock* blocks, int64_t num_blocks, const PanelActivation* const (&a)[NT], int num_rows,
               Out* const (&y)[NT]) {
  for (int half = 0; 8 * half < num_rows; ++half) {
    Sums sums;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const PanelBlock& pb = blocks[b];
      __m256i total[NT], min_total[NT] = {};
      HalfTotals<kType, NT>(pb, half, a, b, total, min_total);
      for (int t = 0; t < NT; ++t) sums.Add(t, pb, half, total[t], min_total[t], a[t][b]);
    }
    for (int t = 0; t < NT; ++t) sums.Store(t, half, num_rows, y[t]);
  }
}

// The tokens of one pass: their accumulators, runs and totals beside a group's weights in the 16 ymm.
// Measured (Q4_0, 576 x 1536, T = 128, float / fixed-point GFLOP/s): 3 / 4 190-231 / 132-172 against
// 2 / 2, 4 / 3 and 6 / 2 at 141-186 / 107-144 (bench/README.md, "Block totals").
template <class Out>
constexpr int kPanelTokens = std::is_same_v<Out, float> ? 3 : 4;

}  // namespace tpserve::internal::TPSERVE_ISA_NS
