// Dot products of one f32 vector with several (paged attention's q·k over the keys of a KV block),
// one instruction-set level. One call per block, not per key: an indirect call per 64-element dot
// cost ~15% of a batch-32 decode step.
// Canonical order (every level): the same as MatMul's float tiles (matmul_float.cc): 16 lanes from
// +0, acc[l] = fma(a[i], b[i], acc[l]) for i = l, l + 16, ... in order, the last chunk zero-padded
// (its padding fmas done too), then Fold16 (canonical_sum.h).
#include <cmath>
#include <cstdint>

#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

inline float Dot(const float* a, const float* b, int64_t n) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return Fold16(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), hi);
  }
  if (i < n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mlo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    const __m256i mhi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i - 8)), lane);
    lo = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, mlo), _mm256_maskload_ps(b + i, mlo), lo);
    hi = _mm256_fmadd_ps(_mm256_maskload_ps(a + i + 8, mhi), _mm256_maskload_ps(b + i + 8, mhi), hi);
  }
  return Fold16(lo, hi);
#else
  float acc[16] = {};
  for (int64_t c = 0; c < n; c += 16) {
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t i = c + l;
      acc[l] = i < n ? std::fma(a[i], b[i], acc[l]) : std::fma(0.0f, 0.0f, acc[l]);
    }
  }
  return Fold16(acc);
#endif
}

}  // namespace

void DotRows(const float* q, const float* k, int64_t k_stride, int64_t num_rows, int64_t n, float* out) {
  for (int64_t r = 0; r < num_rows; ++r) out[r] = Dot(q, k + r * k_stride, n);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
