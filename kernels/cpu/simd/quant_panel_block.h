// Internal to quant_panel.h and its level headers (panel_tokens_avx512.h, panel_tokens_avx2.h): a panel of
// kPanelRows weight rows unpacked once per call into a block-major scratch where, for each 32-value block,
// group g's 4 values of the 16 rows sit side by side (row r's 4 signed bytes at 4r: every type's values
// fit in int8), beside the 16 rows' scales and the corrections −128 · Σ w of each half and of the whole
// block. A token's activations go in as a + 128 (unsigned bytes), so the u8 × s8 dots of the groups'
// values with the token's shifted activations of each group (broadcast to every row), plus the
// correction, give the block's exact total Σ w·a of all 16 rows at once. AVX-512 reads a field of 16 rows
// as one zmm, AVX2 as two ymm of 8 rows.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_unpack.h"
#include "kernels/cpu/simd/transpose_avx2.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// One 32-value block of a panel's 16 rows (rows past the panel's end are zero); element r is row r.
struct alignas(64) PanelBlock {
  int8_t q[8][4 * kPanelRows];       // group g: row r's 4 signed values at bytes 4r..4r+3
  int32_t half_corr[2][kPanelRows];  // half h: row r's −128 · Σ of its 16 values
  int32_t corr[kPanelRows];          // row r's −128 · Σ of the block's 32 values
  float d[kPanelRows];           // row r's d, times the sums' scale (1, or 2^32 for the fixed-point sums)
  float m[kPanelRows];           // offset types: m, times the scale
  float neg_dmin[kPanelRows];    // Q2_K: −dmin, times the scale
  int32_t scale[2][kPanelRows];  // half-scale types: half h's integer scale (groups 4h..4h+3)
  int32_t min[2][kPanelRows];    // Q2_K: half h's integer minimum
};

// Unpacks rows [0, num_rows) of w into blocks[num_blocks], the block-major panel: per block and 8 rows,
// the rows' 32 values (8 groups of 4 bytes each) transposed into the groups' vectors, the corrections
// from them, then the scales.
template <DType kType>
void UnpackPanel(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t num_blocks, float scale,
                 PanelBlock* blocks) {
  if (num_rows < kPanelRows) std::memset(static_cast<void*>(blocks), 0, num_blocks * sizeof(PanelBlock));
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const __m256 scales = _mm256_set1_ps(scale);
  for (int64_t b = 0; b < num_blocks; ++b) {
    PanelBlock& pb = blocks[b];
    for (int half = 0; 8 * half < num_rows; ++half) {
      __m256i v[8];
      alignas(32) float d[8] = {}, m[8] = {}, dmin[8] = {};  // the 8 rows', scaled below in one vector each
      for (int i = 0; i < 8; ++i) {
        const int r = 8 * half + i;
        if (r >= num_rows) {
          v[i] = _mm256_setzero_si256();
          continue;
        }
        const WeightBlock wb = LoadBlock<kType>(w + r * row_bytes, b);
        v[i] = wb.q;
        d[i] = wb.d;
        m[i] = wb.m;
        dmin[i] = wb.dmin;
        if constexpr (HasHalfScales(kType)) {
          pb.scale[0][r] = _mm256_extract_epi32(wb.lane_scale, 0);
          pb.scale[1][r] = _mm256_extract_epi32(wb.lane_scale, 4);
        }
        if constexpr (MinKindOf(kType) == MinKind::kHalves) {
          pb.min[0][r] = _mm256_extract_epi32(wb.lane_min, 0);
          pb.min[1][r] = _mm256_extract_epi32(wb.lane_min, 4);
        }
      }
      // Only the fields the type's passes read (panel_tokens_*.h) are written.
      _mm256_store_ps(pb.d + 8 * half, _mm256_mul_ps(_mm256_load_ps(d), scales));
      if constexpr (MinKindOf(kType) == MinKind::kOffset) {
        _mm256_store_ps(pb.m + 8 * half, _mm256_mul_ps(_mm256_load_ps(m), scales));
      }
      if constexpr (MinKindOf(kType) == MinKind::kHalves) {
        const __m256 scaled = _mm256_mul_ps(_mm256_load_ps(dmin), scales);
        _mm256_store_ps(pb.neg_dmin + 8 * half, _mm256_xor_ps(scaled, _mm256_set1_ps(-0.0f)));  // −(dmin · scale)
      }
      Transpose8x8(v);  // v[g]: group g of the 8 rows, row i's 4 values in int32 i
      __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int g = 0; g < 8; ++g) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(pb.q[g] + 32 * half), v[g]);
        sums[g / 4] = _mm256_add_epi32(sums[g / 4], _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v[g]), ones16));
      }
      const __m256i zero = _mm256_setzero_si256();
      const __m256i corr0 = _mm256_sub_epi32(zero, _mm256_slli_epi32(sums[0], 7));
      const __m256i corr1 = _mm256_sub_epi32(zero, _mm256_slli_epi32(sums[1], 7));
      if constexpr (HasHalfScales(kType)) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(pb.half_corr[0] + 8 * half), corr0);
        _mm256_store_si256(reinterpret_cast<__m256i*>(pb.half_corr[1] + 8 * half), corr1);
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(pb.corr + 8 * half), _mm256_add_epi32(corr0, corr1));
      }
    }
  }
}

// A token's activation block as the panel reads it: a + 128 as unsigned bytes (or a itself where the
// level dots signed values through the sign trick), (Q2_K) Σa per half, and the block's d and Σ, prepared
// once per call for every panel (quant_panel.h).
struct PanelActivation {
  uint8_t bytes[32];
  int32_t half_sums[2];
  float d, sum;
};

template <DType kType, bool kShift>
inline void ReadActivation(const BlockQ8Act& a, PanelActivation* pa) {
  const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
  const __m256i bytes = kShift ? _mm256_xor_si256(aq, _mm256_set1_epi8(-128)) : aq;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(pa->bytes), bytes);
  pa->d = a.d;
  pa->sum = a.sum;
  if constexpr (MinKindOf(kType) == MinKind::kHalves) {
    for (int h = 0; h < 2; ++h) {
      int32_t sum = 0;
      for (int j = 16 * h; j < 16 * h + 16; ++j) sum += a.qs[j];
      pa->half_sums[h] = sum;
    }
  }
}

// Group g's 4 activation bytes as one int32.
inline int32_t ActivationBytes(const PanelActivation& a, int g) {
  int32_t v;
  std::memcpy(&v, a.bytes + 4 * g, 4);
  return v;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
