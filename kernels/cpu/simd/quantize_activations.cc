// QuantizeActivationRow of one instruction-set level. Canonical order: per block of 32,
// amax = max |x| (order-free), d = amax / 127, id = 127 / amax (0 for amax = 0), q = trunc(x·id ± 0.5)
// with the sign of x, sum = d · f32(Σ q) (an exact integer sum). The AVX-512 path is the same
// operations 16 at a time; other levels run the scalar loop (which the compiler may vectorise:
// element-wise, so the same bits).
#include <cmath>

#include "kernels/cpu/quantize_activations.h"

#if defined(__AVX512F__)
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
