// Internal to quant_panel.h, the AVX2 level: the passes of tokens over an unpacked panel
// (quant_panel_block.h), a field of 8 rows in one ymm, the panel's two row halves one after the other.
// AVX2 has no VNNI: group g's lane of 8 rows is maddubs (the token's 4 shifted activations, broadcast,
// as u8 × the rows' values as s8) then madd with ones, plus the correction. No int16 pair saturates where
// |w| <= 32 (2 · 255 · 32 < 2^15): every type but Q8_0, which keeps the tiles here (its blocks need no
// unpacking, and with the sign trick it would need its panels measured slower than the tiles: bench/README.md,
// "Four-row decode and panels on AVX2").
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_panel_block.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Which types take panels for the float (MatMul) and the fixed-point sums. The float sums of the
// half-scale types (Q2_K, Q3_K, Q6_K) keep the tiles too: with 8 accumulators and the scales in registers
// their panels measured slower than the tiles, while their fixed-point panels measured 1.5x faster.
template <class Out>
constexpr bool HasPanel(DType type) {
  return type != DType::kQ8_0 && (!std::is_same_v<Out, float> || !HasHalfScales(type));
}

// Rows 8·half..8·half+7 of a panel field.
inline __m256i Rows8(const int32_t* field, int half) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(field + 8 * half));
}
inline __m256i Rows8(const int8_t* field, int half) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(field + 32 * half));
}
inline __m256 Rows8(const float* field, int half) { return _mm256_load_ps(field + 8 * half); }

// Group g's Σ (a + 128) · w of 8 rows over its 4 values (the caller adds the correction −128 · Σ w).
inline __m256i GroupDot(const PanelActivation& a, int g, __m256i q) {
  return DotU8S8(_mm256_set1_epi32(ActivationBytes(a, g)), q);
}

// Rows [8·half, num_rows) of the half's 8 results in v, at most 8, to y.
template <class T, class V>
inline void StoreRows(const V& v, int half, int num_rows, T* y) {
  static_assert(sizeof(V) == 8 * sizeof(T));
  T lanes[8];
  std::memcpy(lanes, &v, sizeof lanes);
  const int n = std::min(8, num_rows - 8 * half);
  std::memcpy(y + 8 * half, lanes, n * sizeof(T));
}

// MatMul's sums of NT tokens over each row half of the panel: acc[t][g] is lane g of its 8 rows.
template <DType kType, int NT>
void FloatPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, float* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  for (int half = 0; 8 * half < num_rows; ++half) {
    __m256 acc[NT][8], acc_min[NT];
    for (int t = 0; t < NT; ++t) {
      for (int g = 0; g < 8; ++g) acc[t][g] = _mm256_setzero_ps();
      acc_min[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < num_blocks; ++b) {
      const PanelBlock& pb = blocks[b];
      PanelActivation a[NT];
      __m256 scale[NT], min_scale[NT];
      for (int t = 0; t < NT; ++t) {
        ReadActivation<kType>(x[t][b], &a[t]);
        scale[t] = _mm256_mul_ps(Rows8(pb.d, half), _mm256_set1_ps(x[t][b].d));
        if constexpr (kMin == MinKind::kHalves) {
          min_scale[t] = _mm256_mul_ps(Rows8(pb.neg_dmin, half), _mm256_set1_ps(x[t][b].d));
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m256i q = Rows8(pb.q[g], half), corr = Rows8(pb.corr[g], half);
        for (int t = 0; t < NT; ++t) {
          __m256i dot = _mm256_add_epi32(GroupDot(a[t], g, q), corr);
          if constexpr (HasHalfScales(kType)) dot = _mm256_mullo_epi32(dot, Rows8(pb.scale[g / 4], half));
          acc[t][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale[t], acc[t][g]);
          if constexpr (kMin == MinKind::kHalves) {
            const __m256i min_lanes =
                _mm256_mullo_epi32(_mm256_set1_epi32(a[t].sums[g]), Rows8(pb.min[g / 4], half));
            acc[t][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_lanes), min_scale[t], acc[t][g]);
          }
        }
      }
      if constexpr (kMin == MinKind::kOffset) {
        for (int t = 0; t < NT; ++t) {
          acc_min[t] = _mm256_add_ps(acc_min[t], _mm256_mul_ps(Rows8(pb.m, half), _mm256_set1_ps(x[t][b].sum)));
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m256 s[4];
      for (int i = 0; i < 4; ++i) s[i] = _mm256_add_ps(acc[t][i], acc[t][i + 4]);
      const __m256 folded = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3]));
      StoreRows(_mm256_add_ps(folded, acc_min[t]), half, num_rows, y[t]);
    }
  }
}

// MatMulFixedPoint's sums of NT tokens over each row half: per block the 8 rows' exact totals, their
// terms, rounded into int64 rows 0..3 and 4..7 of the half.
template <DType kType, int NT>
void FixedPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, int64_t* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  for (int half = 0; 8 * half < num_rows; ++half) {
    __m256i acc[NT][2];
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
    for (int64_t b = 0; b < num_blocks; ++b) {
      const PanelBlock& pb = blocks[b];
      for (int t = 0; t < NT; ++t) {
        const BlockQ8Act& xa = x[t][b];
        PanelActivation a;
        ReadActivation<kType>(xa, &a);
        // The groups of each half of the block from the half's correction, −128 · Σ w.
        __m256i sums[2] = {Rows8(pb.half_corr[0], half), Rows8(pb.half_corr[1], half)};
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          sums[g / 4] = _mm256_add_epi32(sums[g / 4], GroupDot(a, g, Rows8(pb.q[g], half)));
        }
        const __m256i total = HasHalfScales(kType)
                                  ? _mm256_add_epi32(_mm256_mullo_epi32(sums[0], Rows8(pb.scale[0], half)),
                                                     _mm256_mullo_epi32(sums[1], Rows8(pb.scale[1], half)))
                                  : _mm256_add_epi32(sums[0], sums[1]);
        __m256 terms =
            _mm256_mul_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(Rows8(pb.d, half), _mm256_set1_ps(xa.d)));
        if constexpr (kMin == MinKind::kOffset) {
          terms = _mm256_add_ps(terms, _mm256_mul_ps(Rows8(pb.m, half), _mm256_set1_ps(xa.sum)));
        }
        if constexpr (kMin == MinKind::kHalves) {
          const auto half_sum = [&](int h) {
            return a.sums[4 * h] + a.sums[4 * h + 1] + a.sums[4 * h + 2] + a.sums[4 * h + 3];
          };
          const __m256i min_total =
              _mm256_add_epi32(_mm256_mullo_epi32(_mm256_set1_epi32(half_sum(0)), Rows8(pb.min[0], half)),
                               _mm256_mullo_epi32(_mm256_set1_epi32(half_sum(1)), Rows8(pb.min[1], half)));
          terms = _mm256_add_ps(terms, _mm256_mul_ps(_mm256_cvtepi32_ps(min_total),
                                                     _mm256_mul_ps(Rows8(pb.neg_dmin, half), _mm256_set1_ps(xa.d))));
        }
        acc[t][0] = _mm256_add_epi64(acc[t][0], RoundToFixed4(_mm256_castps256_ps128(terms)));
        acc[t][1] = _mm256_add_epi64(acc[t][1], RoundToFixed4(_mm256_extractf128_ps(terms, 1)));
      }
    }
    for (int t = 0; t < NT; ++t) StoreRows(acc[t], half, num_rows, y[t]);
  }
}

// The tokens of one reduction at a time: float sums take 1 (8 accumulators of the 16 ymm), fixed-point
// sums 2.
template <class Out>
constexpr int kPanelTokens = std::is_same_v<Out, float> ? 1 : 2;

}  // namespace tpserve::internal::TPSERVE_ISA_NS
