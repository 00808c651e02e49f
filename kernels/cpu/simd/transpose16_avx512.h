// Internal to the AVX-512 level's fixed-point decode (fixed_row_stream_avx512.h): 16 runs of 16 weights
// transposed, the runs in lanes. 16-bit weights (F16, BF16) are transposed as words and then widened to f32 one
// position at a time: widening each run first and transposing 8 × 8 blocks of f32 (the AVX2 panels' way) takes
// about 200 vector operations per 256 weights, the words 32 shuffles and a widening per position, about 100
// with the fmas. F32 weights take 64 shuffles per 256.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// row_at(i) (i < 16): run i's 16 words. t[c] (c < 8): word c of every run in its low 256 bits, word c + 8 of
// every run in its high ones, runs in order. (Below, a run is a "row" and a word position a "column".)
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

// r[i] (i < 16): run i's 16 f32 → r[c]: position c of every run, runs in order.
inline void TransposeFloats16(__m512 (&r)[16]) {
  __m512 a[16], b[16];
  for (int k = 0; k < 8; ++k) {  // in each 128-bit lane L: runs 2k and 2k + 1 at positions 4L..4L + 3
    a[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // b[4k + m], lane L: runs 4k..4k + 3 at position 4L + m
    for (int h = 0; h < 2; ++h) {
      const __m512d lo = _mm512_castps_pd(a[4 * k + h]), hi = _mm512_castps_pd(a[4 * k + 2 + h]);
      b[4 * k + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
      b[4 * k + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
    }
  }
  for (int m = 0; m < 4; ++m) {  // position 4L + m: lane L of b[m], b[4 + m], b[8 + m], b[12 + m]
    const __m512 even0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x88), odd0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xdd);
    const __m512 even1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x88);
    const __m512 odd1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xdd);
    r[m] = _mm512_shuffle_f32x4(even0, even1, 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(even0, even1, 0xdd);
    r[4 + m] = _mm512_shuffle_f32x4(odd0, odd1, 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(odd0, odd1, 0xdd);
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
