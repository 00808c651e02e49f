// Internal to float_panel.h, the AVX-512 level: 16 rows × 16 columns of 16-bit weights (F16, BF16)
// transposed as words, then widened to f32 one column at a time, with the rows in lanes.
//
// The fixed-point decode (FixedDirectTokens) needs each chunk column's 16 rows side by side. Widening each
// row to f32 first and transposing 8 × 8 blocks of f32 took about 200 vector operations per 256 weights
// (2 per 8-weight conversion, 24 per block, an fma per 8 rows); the words take 32 shuffles and a widening per
// column of 16 rows, about 100 with the fmas (figures at FixedDirectWords, float_panel.h).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// row_at(i) (i < 16): row i's 16 words of the chunk. t[c] (c < 8): column c's 16 words in its low 256 bits,
// column c + 8's in its high ones, rows in order.
template <class RowAt>
inline void TransposeWords16(RowAt row_at, __m512i (&t)[8]) {
  // z[i]'s 128-bit lanes: row i's columns 0-7, row i + 8's 0-7, row i's 8-15, row i + 8's 8-15.
  const __m512i lanes = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  __m512i z[8];
  for (int i = 0; i < 8; ++i) {
    const __m512i a = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_at(i))));
    const __m512i b = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_at(i + 8))));
    z[i] = _mm512_permutex2var_epi64(a, lanes, b);
  }
  // Within each lane (8 columns of one row in every z): row pairs' words, then dwords, then qwords interleaved.
  __m512i u[8];  // u[2p + h]: rows 2p and 2p + 1, columns 4h..4h + 3 of the lane
  for (int p = 0; p < 4; ++p) {
    u[2 * p] = _mm512_unpacklo_epi16(z[2 * p], z[2 * p + 1]);
    u[2 * p + 1] = _mm512_unpackhi_epi16(z[2 * p], z[2 * p + 1]);
  }
  __m512i v[8];  // v[4q + m]: rows 4q..4q + 3, columns 2m and 2m + 1 of the lane
  for (int q = 0; q < 2; ++q) {
    for (int h = 0; h < 2; ++h) {
      v[4 * q + 2 * h] = _mm512_unpacklo_epi32(u[4 * q + h], u[4 * q + 2 + h]);
      v[4 * q + 2 * h + 1] = _mm512_unpackhi_epi32(u[4 * q + h], u[4 * q + 2 + h]);
    }
  }
  for (int m = 0; m < 4; ++m) {  // lanes: rows 0-7 and 8-15 of column 2m (+1), then of column 2m (+1) + 8
    t[2 * m] = _mm512_unpacklo_epi64(v[m], v[4 + m]);
    t[2 * m + 1] = _mm512_unpackhi_epi64(v[m], v[4 + m]);
  }
}

// The 16 words of half h (0: low 256 bits, 1: high) of t as f32, exactly.
template <DType kType>
inline __m512 WidenWords(__m512i t, int h) {
  static_assert(kType == DType::kF16 || kType == DType::kBF16);
  if constexpr (kType == DType::kF16) {
    return _mm512_cvtph_ps(h == 0 ? _mm512_castsi512_si256(t) : _mm512_extracti64x4_epi64(t, 1));
  } else {  // word 16h + i to the high half of lane i, the low half zero: one permute
    const __m512i lo = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4,
                                        0, 3, 0, 2, 0, 1, 0, 0, 0);
    const __m512i index = h == 0 ? lo : _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, index, t));
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
