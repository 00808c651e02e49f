// Internal to kernels/cpu/simd/matmul_quant.cc, AVX-512 with VNNI: prefill (kPanelMinTokens or more) over
// panels of 16 weight rows. A panel is unpacked once per call into a scratch where, for each 32-value
// block, group g's 4 values of the 16 rows sit side by side in one vector (row r's 4 signed bytes at
// 4r: every type's values fit in int8), beside the 16 rows' scales in vectors and each group's
// correction −128 · Σ w. VNNI multiplies unsigned by signed bytes, so a token's activations go in as
// a + 128 (one xor per block): one VNNI dot of group g's vector with the token's 4 shifted activations
// of that group (broadcast), started from the correction, gives lane g of all 16 rows at once, Σ w·a,
// the canonical integer lane exactly.
//
// The 8-lane tiles unpack each weight block again for every tile of up to 4 tokens and spend a
// horizontal fold per output; a panel unpacks once for all the tokens, and its accumulators hold one
// lane of 16 outputs each, so the Fold8 tree (and the fixed-point block total) is plain vector adds.
//
// Every output sees exactly the operations of matmul_quant.cc's canonical order: the same exact
// integer lanes, the same f32 products d_w · d_a, one fma per lane and block in block order, the
// offset sum beside them, the same Fold8 tree; for the fixed-point sums the same term per block,
// rounded to int64 the same way. The ISA equality test holds this level to the portable one.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_unpack.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
#define TPSERVE_QUANT_PANELS 1

namespace tpserve::internal::TPSERVE_ISA_NS {

// One 32-value block of a panel's 16 rows (rows past the panel's end are zero).
struct alignas(64) PanelBlock {
  __m512i q[8];         // group g: row r's 4 signed values at bytes 4r..4r+3
  __m512i corr[8];      // group g: row r's −128 · Σ of those 4 values
  __m512i half_corr[2]; // half h: row r's −128 · Σ of its 16 values
  __m512 d;             // row r's d, times the sums' scale (1, or 2^32 for the fixed-point sums)
  __m512 m;             // offset types: m, times the scale
  __m512 neg_dmin;      // Q2_K: −dmin, times the scale
  __m512i scale[2];     // half-scale types: half h's integer scale (groups 4h..4h+3)
  __m512i min[2];       // Q2_K: half h's integer minimum
};

template <class T, class V>
inline T& Lane(V& v, int r) {
  return reinterpret_cast<T*>(&v)[r];
}

// Unpacks rows [0, num_rows) of w into blocks[num_blocks], the block-major panel.
template <DType kType>
void UnpackPanel(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t num_blocks, float scale,
                 PanelBlock* blocks) {
  std::memset(static_cast<void*>(blocks), 0, num_blocks * sizeof(PanelBlock));
  for (int r = 0; r < num_rows; ++r) {
    for (int64_t b = 0; b < num_blocks; ++b) {
      const WeightBlock wb = LoadBlock<kType>(w + r * row_bytes, b);
      PanelBlock& pb = blocks[b];
      alignas(32) int8_t values[32];
      alignas(32) int32_t lane_scale[8], lane_min[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(values), wb.q);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane_scale), wb.lane_scale);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane_min), wb.lane_min);
      for (int g = 0; g < 8; ++g) {
        std::memcpy(&Lane<int32_t>(pb.q[g], r), values + 4 * g, 4);
        const int32_t corr = -128 * (values[4 * g] + values[4 * g + 1] + values[4 * g + 2] + values[4 * g + 3]);
        Lane<int32_t>(pb.corr[g], r) = corr;
        Lane<int32_t>(pb.half_corr[g / 4], r) += corr;
      }
      Lane<float>(pb.d, r) = wb.d * scale;
      Lane<float>(pb.m, r) = wb.m * scale;
      Lane<float>(pb.neg_dmin, r) = -(wb.dmin * scale);
      for (int h = 0; h < 2; ++h) {
        Lane<int32_t>(pb.scale[h], r) = lane_scale[4 * h];
        Lane<int32_t>(pb.min[h], r) = lane_min[4 * h];
      }
    }
  }
}

// A token's activation block as the panel reads it: a + 128 as unsigned bytes, and (Q2_K) Σa per group.
struct PanelActivation {
  alignas(32) uint8_t shifted[32];
  alignas(32) int32_t sums[8];
};

template <DType kType>
inline void ReadActivation(const BlockQ8Act& a, PanelActivation* pa) {
  const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
  _mm256_store_si256(reinterpret_cast<__m256i*>(pa->shifted), _mm256_xor_si256(aq, _mm256_set1_epi8(-128)));
  if constexpr (MinKindOf(kType) == MinKind::kHalves) {
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), aq);
    _mm256_store_si256(reinterpret_cast<__m256i*>(pa->sums), sums);
  }
}

// Group g's 4 shifted activations broadcast to every row.
inline __m512i ActivationGroup(const PanelActivation& a, int g) {
  int32_t v;
  std::memcpy(&v, a.shifted + 4 * g, 4);
  return _mm512_set1_epi32(v);
}

// MatMul's sums of NT tokens over the panel: acc[t][g] is lane g of the 16 rows.
template <DType kType, int NT>
void FloatPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, float* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  __m512 acc[NT][8], acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    for (int g = 0; g < 8; ++g) acc[t][g] = _mm512_setzero_ps();
    acc_min[t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    const PanelBlock& pb = blocks[b];
    PanelActivation a[NT];
    __m512 scale[NT], min_scale[NT];
    for (int t = 0; t < NT; ++t) {
      ReadActivation<kType>(x[t][b], &a[t]);
      scale[t] = _mm512_mul_ps(pb.d, _mm512_set1_ps(x[t][b].d));
      if constexpr (kMin == MinKind::kHalves) min_scale[t] = _mm512_mul_ps(pb.neg_dmin, _mm512_set1_ps(x[t][b].d));
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i q = pb.q[g], corr = pb.corr[g];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        __m512i dot = _mm512_dpbusd_epi32(corr, ActivationGroup(a[t], g), q);
        if constexpr (HasHalfScales(kType)) dot = _mm512_mullo_epi32(dot, pb.scale[g / 4]);
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale[t], acc[t][g]);
        if constexpr (kMin == MinKind::kHalves) {
          const __m512i min_lanes = _mm512_mullo_epi32(_mm512_set1_epi32(a[t].sums[g]), pb.min[g / 4]);
          acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(min_lanes), min_scale[t], acc[t][g]);
        }
      }
    }
    if constexpr (kMin == MinKind::kOffset) {
      for (int t = 0; t < NT; ++t) {
        acc_min[t] = _mm512_add_ps(acc_min[t], _mm512_mul_ps(pb.m, _mm512_set1_ps(x[t][b].sum)));
      }
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << num_rows) - 1);
  for (int t = 0; t < NT; ++t) {
    __m512 s[4];
    for (int i = 0; i < 4; ++i) s[i] = _mm512_add_ps(acc[t][i], acc[t][i + 4]);
    const __m512 folded = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    _mm512_mask_storeu_ps(y[t], rows, _mm512_add_ps(folded, acc_min[t]));
  }
}

// MatMulFixedPoint's sums of NT tokens over the panel: per block the 16 rows' exact totals, their
// terms, rounded into int64 rows 0..7 and 8..15.
template <DType kType, int NT>
void FixedPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, int64_t* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  __m512i acc[NT][2];
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_si512();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const PanelBlock& pb = blocks[b];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const BlockQ8Act& xa = x[t][b];
      PanelActivation a;
      ReadActivation<kType>(xa, &a);
      __m512i half[2] = {pb.half_corr[0], pb.half_corr[1]};
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) half[g / 4] = _mm512_dpbusd_epi32(half[g / 4], ActivationGroup(a, g), pb.q[g]);
      const __m512i total = HasHalfScales(kType) ? _mm512_add_epi32(_mm512_mullo_epi32(half[0], pb.scale[0]),
                                                                    _mm512_mullo_epi32(half[1], pb.scale[1]))
                                                 : _mm512_add_epi32(half[0], half[1]);
      __m512 terms = _mm512_mul_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(pb.d, _mm512_set1_ps(xa.d)));
      if constexpr (kMin == MinKind::kOffset) {
        terms = _mm512_add_ps(terms, _mm512_mul_ps(pb.m, _mm512_set1_ps(xa.sum)));
      }
      if constexpr (kMin == MinKind::kHalves) {
        const auto half_sum = [&](int h) {
          return a.sums[4 * h] + a.sums[4 * h + 1] + a.sums[4 * h + 2] + a.sums[4 * h + 3];
        };
        const __m512i min_total = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set1_epi32(half_sum(0)), pb.min[0]),
                                                   _mm512_mullo_epi32(_mm512_set1_epi32(half_sum(1)), pb.min[1]));
        terms = _mm512_add_ps(terms, _mm512_mul_ps(_mm512_cvtepi32_ps(min_total),
                                                   _mm512_mul_ps(pb.neg_dmin, _mm512_set1_ps(xa.d))));
      }
      acc[t][0] = _mm512_add_epi64(acc[t][0], _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(terms), kRound));
      acc[t][1] = _mm512_add_epi64(acc[t][1], _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(terms, 1), kRound));
    }
  }
  const __mmask8 lo = static_cast<__mmask8>(num_rows >= 8 ? 0xff : (1u << num_rows) - 1);
  const __mmask8 hi = static_cast<__mmask8>(num_rows <= 8 ? 0 : (1u << (num_rows - 8)) - 1);
  for (int t = 0; t < NT; ++t) {
    _mm512_mask_storeu_epi64(y[t], lo, acc[t][0]);
    _mm512_mask_storeu_epi64(y[t] + 8, hi, acc[t][1]);
  }
}

// The tokens of one reduction at a time: float sums take 3 (24 accumulators), fixed-point sums 4.
template <class Out>
constexpr int kPanelTokens = std::is_same_v<Out, float> ? 3 : 4;

template <DType kType, class Out, int NT>
void PanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT], int num_rows,
                 Out* const (&y)[NT]) {
  if constexpr (std::is_same_v<Out, float>) {
    FloatPanelTokens<kType, NT>(blocks, num_blocks, x, num_rows, y);
  } else {
    FixedPanelTokens<kType, NT>(blocks, num_blocks, x, num_rows, y);
  }
}

// The token tile of nt (< NT) tokens that ends a panel's pass.
template <DType kType, class Out, int NT>
void PanelTail(int nt, const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const* x, int num_rows,
               Out* const* y) {
  if constexpr (NT > 1) {
    if (nt == NT - 1) {
      const BlockQ8Act* xs[NT - 1];
      Out* ys[NT - 1];
      for (int t = 0; t < NT - 1; ++t) {
        xs[t] = x[t];
        ys[t] = y[t];
      }
      PanelTokens<kType, Out, NT - 1>(blocks, num_blocks, xs, num_rows, ys);
    } else {
      PanelTail<kType, Out, NT - 1>(nt, blocks, num_blocks, x, num_rows, y);
    }
  }
}

// PanelFn (matmul_tile.h): unpacks the panel, then passes every token over it.
template <DType kType, class Out>
void QuantPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride) {
  constexpr int NT = kPanelTokens<Out>;
  const int64_t num_blocks = cols / kQuantBlock;
  thread_local std::vector<PanelBlock> scratch;  // [cols / 32], reused across calls
  if (static_cast<int64_t>(scratch.size()) < num_blocks) scratch.resize(num_blocks);
  UnpackPanel<kType>(w, row_bytes, num_rows, num_blocks, std::is_same_v<Out, float> ? 1.0f : kFixedPointScale,
                     scratch.data());
  const BlockQ8Act* xs[NT];
  Out* ys[NT];
  for (int64_t t0 = 0; t0 < num_tokens; t0 += NT) {
    const int nt = static_cast<int>(std::min<int64_t>(NT, num_tokens - t0));
    for (int t = 0; t < nt; ++t) {
      xs[t] = reinterpret_cast<const BlockQ8Act*>(x + (t0 + t) * x_stride);
      ys[t] = y + (t0 + t) * y_stride;
    }
    if (nt == NT) {
      PanelTokens<kType, Out, NT>(scratch.data(), num_blocks, xs, num_rows, ys);
    } else {
      PanelTail<kType, Out, NT>(nt, scratch.data(), num_blocks, xs, num_rows, ys);
    }
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS

#endif
