// QuantizeActivationRow of one instruction-set level. Canonical order: per block of 32,
// amax = max |x| (order-free), d = amax / 127, id = 127 / amax (0 for amax = 0), q = trunc(x·id ± 0.5)
// with the sign of x, sum = d · f32(Σ q) (an exact integer sum). The AVX-512 path is the same
// operations 16 at a time, the AVX2 path 8 at a time; the portable level runs the scalar loop.
#include <cmath>

#include "kernels/cpu/quantize_activations.h"

#if defined(__AVX2__)
#include "kernels/cpu/simd/intrinsics.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {

// REQUIRES: n % kQuantBlock == 0 (checked by the dispatching QuantizeActivationRow).
void QuantizeActivationRow(const float* x, int64_t n, BlockQ8Act* dst) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    BlockQ8Act& out = dst[b];
#if defined(__AVX512F__)
    const __m512 lo = _mm512_loadu_ps(xb);
    const __m512 hi = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    // Round half away from zero like the scalar path: (|v| + 0.5) truncated, sign restored.
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i qlo = _mm512_cvttps_epi32(
        _mm512_add_ps(_mm512_mul_ps(lo, vid), _mm512_mask_blend_ps(_mm512_cmp_ps_mask(lo, _mm512_setzero_ps(), _CMP_LT_OQ),
                                                                     _mm512_set1_ps(0.5f), _mm512_set1_ps(-0.5f))));
    const __m512i qhi = _mm512_cvttps_epi32(
        _mm512_add_ps(_mm512_mul_ps(hi, vid), _mm512_mask_blend_ps(_mm512_cmp_ps_mask(hi, _mm512_setzero_ps(), _CMP_LT_OQ),
                                                                     _mm512_set1_ps(0.5f), _mm512_set1_ps(-0.5f))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs), _mm512_cvtsepi32_epi8(qlo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + 16), _mm512_cvtsepi32_epi8(qhi));
    const int isum = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
#elif defined(__AVX2__)
    __m256 v[4];
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      vmax = _mm256_max_ps(vmax, _mm256_and_ps(v[i], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 half = _mm256_blendv_ps(_mm256_set1_ps(0.5f), _mm256_set1_ps(-0.5f),
                                           _mm256_cmp_ps(v[i], _mm256_setzero_ps(), _CMP_LT_OQ));
      q[i] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[i], vid), half));
    }
    // Packing interleaves the 128-bit halves: 0 2 4 6 1 3 5 7 groups of four, put back in order.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs),
                        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    const int isum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1))));
#else
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int isum = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      const float v = xb[j] * id;
      const int q = static_cast<int>(v < 0.0f ? v - 0.5f : v + 0.5f);
      out.qs[j] = static_cast<int8_t>(q);
      isum += q;
    }
#endif
    out.d = d;
    out.sum = d * static_cast<float>(isum);
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
