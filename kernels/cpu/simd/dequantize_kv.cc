// KV cache rows to f32 (paged attention over an f16, bf16 or q8_0 cache), one instruction-set level.
// Each value is converted exactly (f16, bf16 to f32) or by one IEEE product (q8_0: d · q with d the
// block's f16 scale as f32), so every level gives the bits of the reference dequantiser
// (common/dtype.h DequantizeRow), which the portable level calls.
#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

void DequantizeKvRow(DType type, const uint8_t* src, int64_t n, float* dst) {
#if defined(__AVX2__) && defined(__F16C__)
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
      }
      for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = _cvtsh_ss(h);
      }
      return;
    }
    case DType::kBF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
      }
      for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(dst + i, &bits, 4);
      }
      return;
    }
    case DType::kQ8_0: {  // ggml's block: f16 scale, then 32 int8
      constexpr int64_t kBlockBytes = 2 + 32;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* block = src + b * kBlockBytes;
        uint16_t h;
        std::memcpy(&h, block, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
        for (int64_t k = 0; k < 32; k += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + k));
          _mm256_storeu_ps(dst + b * 32 + k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
      return;
    }
    default:
      break;
  }
#endif
  DequantizeRow(type, src, dst, n);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
