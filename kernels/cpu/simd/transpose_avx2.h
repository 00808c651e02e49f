// Internal to the AVX2-and-up panels (quant_panel_block.h, float_panel.h): an 8 × 8 transpose of
// 32-bit lanes, which turns 8 rows' consecutive values into one vector per column with the rows in lanes.
#pragma once

#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Transposes 8 × 8 int32: v[i] element j becomes v[j] element i.
inline void Transpose8x8(__m256i (&v)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int j = 0; j < 2; ++j) {
      u[i + j] = _mm256_unpacklo_epi64(t[i + j], t[i + j + 2]);
      u[i + j + 2] = _mm256_unpackhi_epi64(t[i + j], t[i + j + 2]);
    }
  }
  // u[k] (k < 4) holds one column c of rows 0-3 in its low 128 bits and column c + 4 in its high ones
  // (u[4 + k] the same of rows 4-7); column c's k is order[c].
  const int order[4] = {0, 2, 1, 3};
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_permute2x128_si256(u[order[c]], u[order[c] + 4], 0x20);
    v[c + 4] = _mm256_permute2x128_si256(u[order[c]], u[order[c] + 4], 0x31);
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
