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

// AVX2 without AVX-512 takes four rows at once (Dot4).
#if defined(__AVX2__) && defined(__FMA__) && !(defined(__AVX512F__) && defined(__AVX512DQ__))
#define TPSERVE_DOT4 1
#endif

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

#if TPSERVE_DOT4
// Four rows of whole 16-element chunks at once: q's chunk loaded once for the four, and the four folds
// done together, each Fold16's adds in its order: b = lo + hi; s[i] = b[i] + b[i + 4] as 128-bit halves
// of two rows side by side; (s0 + s2) and (s1 + s3) by two shuffles and an add; their sum by hadd.
// (SmolLM2's 64-element heads: the fold cost as much as the 8 FMAs of a row.)
inline void Dot4(const float* q, const float* k, int64_t k_stride, int64_t n, float* out) {
  __m256 lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m256 qlo = _mm256_loadu_ps(q + i), qhi = _mm256_loadu_ps(q + i + 8);
    for (int r = 0; r < 4; ++r) {
      lo[r] = _mm256_fmadd_ps(qlo, _mm256_loadu_ps(k + r * k_stride + i), lo[r]);
      hi[r] = _mm256_fmadd_ps(qhi, _mm256_loadu_ps(k + r * k_stride + i + 8), hi[r]);
    }
  }
  __m256 b[4];
  for (int r = 0; r < 4; ++r) b[r] = _mm256_add_ps(lo[r], hi[r]);
  // s01 = [row 0's s0..s3 | row 1's s0..s3], s23 the same of rows 2 and 3.
  const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20), _mm256_permute2f128_ps(b[0], b[1], 0x31));
  const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(b[2], b[3], 0x20), _mm256_permute2f128_ps(b[2], b[3], 0x31));
  // [s0 + s2, s1 + s3] of rows 0 and 2 | of rows 1 and 3.
  const __m256 pairs = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 sums = _mm256_hadd_ps(pairs, pairs);  // [r0 r2 r0 r2 | r1 r3 r1 r3]
  _mm_storeu_ps(out, _mm_unpacklo_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1)));
}
#endif

}  // namespace

void DotRows(const float* q, const float* k, int64_t k_stride, int64_t num_rows, int64_t n, float* out) {
  int64_t r = 0;
#if TPSERVE_DOT4
  if (n % 16 == 0) {
    for (; r + 4 <= num_rows; r += 4) Dot4(q, k + r * k_stride, k_stride, n, out + r);
  }
#endif
  for (; r < num_rows; ++r) out[r] = Dot(q, k + r * k_stride, n);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
