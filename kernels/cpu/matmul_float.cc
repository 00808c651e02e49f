// Tiles for float weights (F32, F16, BF16) times f32 activations. Each y[t, r] owns one
// accumulator of 16 lanes filled in column order, then reduced in a fixed tree.
#include <cstring>

#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cpu/matmul_tile.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define TPSERVE_MATMUL_AVX512 1
#endif
#include "kernels/cpu/simd.h"

namespace tpserve::internal {
namespace {

#if TPSERVE_MATMUL_AVX512
// Loads 16 weights starting at element k as f32; `mask` selects the valid ones of a tail.
struct LoadF32 {
  static __m512 Load(const uint8_t* row, int64_t k, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static __m512 Load(const uint8_t* row, int64_t k, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k));
  }
};
struct LoadBF16 {
  static __m512 Load(const uint8_t* row, int64_t k, __mmask16 mask) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  auto step = [&](int64_t k, __mmask16 mask) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Loader::Load(w + r * row_bytes, k, mask);
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(x + t * x_stride) + k);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  };
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) step(k, 0xffff);
  if (k < cols) step(k, static_cast<__mmask16>((1u << (cols - k)) - 1));
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// AVX2 path: 8 lanes per accumulator; a tail of fewer than 8 columns goes through a zero-padded copy.
struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 Load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= cols; k += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = Loader::Load(w + r * row_bytes + k * Loader::kBytes);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(reinterpret_cast<const float*>(x + t * x_stride) + k);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (k < cols) {
    const int64_t rest = cols - k;
    alignas(32) uint8_t wtail[NR][32] = {};
    alignas(32) float xtail[NT][8] = {};
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) {
      std::memcpy(wtail[r], w + r * row_bytes + k * Loader::kBytes, rest * Loader::kBytes);
      wv[r] = Loader::Load(wtail[r]);
    }
    for (int t = 0; t < NT; ++t) {
      std::memcpy(xtail[t], reinterpret_cast<const float*>(x + t * x_stride) + k, rest * sizeof(float));
      const __m256 xv = _mm256_load_ps(xtail[t]);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) {
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r][t]), _mm256_extractf128_ps(acc[r][t], 1));
      s = _mm_add_ps(s, _mm_movehl_ps(s, s));
      s = _mm_add_ss(s, _mm_movehdup_ps(s));
      y[t * y_stride + r] = _mm_cvtss_f32(s);
    }
  }
}
#else
// Portable path: one scalar accumulator per output, columns in order.
struct LoadF32 {
  static float Load(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct LoadF16 {
  static float Load(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Fp16ToF32(h);
  }
};
struct LoadBF16 {
  static float Load(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Bf16ToF32(h);
  }
};

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      float acc = 0.0f;
      for (int64_t k = 0; k < cols; ++k) acc += Loader::Load(w + r * row_bytes, k) * xt[k];
      y[t * y_stride + r] = acc;
    }
  }
}
#endif

template <class Loader>
TileTable MakeTable() {
  return TileTable{{
      {FloatTile<Loader, 1, 1>, FloatTile<Loader, 1, 2>, FloatTile<Loader, 1, 3>, FloatTile<Loader, 1, 4>},
      {FloatTile<Loader, 2, 1>, FloatTile<Loader, 2, 2>, FloatTile<Loader, 2, 3>, FloatTile<Loader, 2, 4>},
      {FloatTile<Loader, 4, 1>, FloatTile<Loader, 4, 2>, FloatTile<Loader, 4, 3>, FloatTile<Loader, 4, 4>},
  }};
}

}  // namespace

const TileTable& FloatTiles(DType type) {
  static const TileTable kF32 = MakeTable<LoadF32>();
  static const TileTable kF16 = MakeTable<LoadF16>();
  static const TileTable kBF16 = MakeTable<LoadBF16>();
  switch (type) {
    case DType::kF32: return kF32;
    case DType::kF16: return kF16;
    case DType::kBF16: return kBF16;
    default: break;
  }
  CHECK(false) << "not a float dtype: " << DTypeName(type);
  return kF32;
}

}  // namespace tpserve::internal
