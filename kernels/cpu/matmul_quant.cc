// Tiles for quantised weights (Q8_0, Q4_0, Q4_1) times Q8 activation blocks: integer dot products
// per 32-element block in 8 lanes of 4 elements, then per block one of two reductions (the Sum
// policies below): MatMul's f32 fused multiply-add of the lanes by the two scales, in one fixed
// order per output; or MatMulFixedPoint's rounding of each scaled lane into an int64 lane.
// Integer sums are exact, so every instruction path (VNNI, maddubs, scalar) gives the same lanes,
// and each output's reduction is the same sequence in any tile, which keeps the result batch invariant.
#include <cstring>

#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cpu/fixed_point_lanes.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"

#if TPSERVE_FIXED_POINT_AVX2
#define TPSERVE_QUANT_AVX2 1
#include "kernels/cpu/simd.h"
#endif

namespace tpserve::internal {
namespace {

inline float Half(uint16_t h) {
#if TPSERVE_QUANT_AVX2
  return _cvtsh_ss(h);
#else
  return Fp16ToF32(h);
#endif
}

#if TPSERVE_QUANT_AVX2
// Eight int32 lanes, lane i = Σ_{j<4} u[4i+j] * s[4i+j] for unsigned u and signed s bytes.
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Signed × signed through the sign trick: |w| · (a with w's sign).
inline __m256i DotS8S8(__m256i w, __m256i a) { return DotU8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)); }

// 16 packed bytes → 32 nibbles in element order (low nibbles are elements 0..15).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One weight block, unpacked for the dot with any number of tokens.
struct WeightBlock {
  __m256i q;   // Q8_0, Q4_0: signed values; Q4_1: unsigned nibbles
  float d;
  float m;     // Q4_1 only
};

template <DType kType>
inline WeightBlock LoadBlock(const uint8_t* row, int64_t b) {
  WeightBlock wb{};
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    wb.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    wb.q = _mm256_sub_epi8(UnpackNibbles(blk->qs), _mm256_set1_epi8(8));
    wb.d = Half(blk->d);
  } else {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    wb.q = UnpackNibbles(blk->qs);
    wb.d = Half(blk->d);
    wb.m = Half(blk->m);
  }
  return wb;
}

// MatMul's reduction: one f32 accumulator of 8 lanes, block after block, then a fixed tree.
struct FloatSum {
  using Out = float;
  static constexpr float kScale = 1.0f;
  void AddBlock(__m256i dot, float scale) {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale), acc);
  }
  void AddMin(float v) { acc_min += v; }
  float Result() const { return HorizontalSum(acc) + acc_min; }
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0.0f;  // Q4_1: Σ m · (d_a Σ a)
};

// MatMulFixedPoint's reduction: the scales carry 2^32, each lane's term rounds into an int64 lane.
struct FixedSum {
  using Out = int64_t;
  static constexpr float kScale = kFixedPointScale;
  void AddBlock(__m256i dot, float scale) { acc.Add(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale))); }
  void AddMin(float v) { acc_min = WrapAdd(acc_min, ToFixed(v)); }
  int64_t Result() const { return WrapAdd(acc.Sum(), acc_min); }
  FixedLanes acc;
  int64_t acc_min = 0;
};

template <DType kType, class Sum, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sum::Out* y, int64_t y_stride) {
  Sum acc[NR][NT];
  const int64_t num_blocks = cols / kQuantBlock;
  for (int64_t b = 0; b < num_blocks; ++b) {
    WeightBlock wb[NR];
    for (int r = 0; r < NR; ++r) {
      wb[r] = LoadBlock<kType>(w + r * row_bytes, b);
      wb[r].d *= Sum::kScale;  // exact: a power of two
      wb[r].m *= Sum::kScale;
    }
    for (int t = 0; t < NT; ++t) {
      const BlockQ8Act& a = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride)[b];
      const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      for (int r = 0; r < NR; ++r) {
        const __m256i dot = kType == DType::kQ4_1 ? DotU8S8(wb[r].q, aq) : DotS8S8(wb[r].q, aq);
        acc[r][t].AddBlock(dot, wb[r].d * a.d);
        if constexpr (kType == DType::kQ4_1) acc[r][t].AddMin(wb[r].m * a.sum);
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = acc[r][t].Result();
}
#else
// Portable path: exact integer lanes (lane i = Σ_{j<4} w[4i+j]·a[4i+j], as in the SIMD paths).
constexpr int kLanes = 8;

template <DType kType>
inline void BlockDot(const uint8_t* row, int64_t b, const int8_t* a, int32_t lanes[kLanes], float* d, float* m) {
  int32_t w[kQuantBlock];
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    for (int j = 0; j < kQuantBlock; ++j) w[j] = blk->qs[j];
    *d = Half(blk->d);
  } else {
    const uint8_t* qs;
    int offset = 0;
    if constexpr (kType == DType::kQ4_0) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
      qs = blk->qs;
      offset = 8;
      *d = Half(blk->d);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
      qs = blk->qs;
      *d = Half(blk->d);
      *m = Half(blk->m);
    }
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      w[j] = (qs[j] & 0xf) - offset;
      w[j + 16] = (qs[j] >> 4) - offset;
    }
  }
  for (int i = 0; i < kLanes; ++i) {
    lanes[i] = 0;
    for (int j = 4 * i; j < 4 * i + 4; ++j) lanes[i] += w[j] * a[j];
  }
}

// MatMul's reduction: one f32 accumulator per output in block order.
struct FloatSum {
  using Out = float;
  static constexpr float kScale = 1.0f;
  void AddBlock(const int32_t lanes[kLanes], float scale) {
    int32_t sum = 0;
    for (int i = 0; i < kLanes; ++i) sum += lanes[i];
    acc += static_cast<float>(sum) * scale;
  }
  void AddMin(float v) { acc_min += v; }
  float Result() const { return acc + acc_min; }
  float acc = 0.0f;
  float acc_min = 0.0f;  // Q4_1: Σ m · (d_a Σ a)
};

// MatMulFixedPoint's reduction: the scales carry 2^32, each lane's term rounds into the int64 sum.
struct FixedSum {
  using Out = int64_t;
  static constexpr float kScale = kFixedPointScale;
  void AddBlock(const int32_t lanes[kLanes], float scale) {
    for (int i = 0; i < kLanes; ++i) acc = WrapAdd(acc, ToFixed(static_cast<float>(lanes[i]) * scale));
  }
  void AddMin(float v) { acc = WrapAdd(acc, ToFixed(v)); }
  int64_t Result() const { return acc; }
  int64_t acc = 0;
};

template <DType kType, class Sum, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sum::Out* y, int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    const auto* act = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      Sum acc;
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        float d = 0.0f, m = 0.0f;
        int32_t lanes[kLanes];
        BlockDot<kType>(w + r * row_bytes, b, act[b].qs, lanes, &d, &m);
        acc.AddBlock(lanes, (d * Sum::kScale) * act[b].d);
        if constexpr (kType == DType::kQ4_1) acc.AddMin((m * Sum::kScale) * act[b].sum);
      }
      y[t * y_stride + r] = acc.Result();
    }
  }
}
#endif

template <DType kType, class Sum>
TileTable<typename Sum::Out> MakeTable() {
  return TileTable<typename Sum::Out>{{
      {QuantTile<kType, Sum, 1, 1>, QuantTile<kType, Sum, 1, 2>, QuantTile<kType, Sum, 1, 3>,
       QuantTile<kType, Sum, 1, 4>},
      {QuantTile<kType, Sum, 2, 1>, QuantTile<kType, Sum, 2, 2>, QuantTile<kType, Sum, 2, 3>,
       QuantTile<kType, Sum, 2, 4>},
      {QuantTile<kType, Sum, 4, 1>, QuantTile<kType, Sum, 4, 2>, QuantTile<kType, Sum, 4, 3>,
       QuantTile<kType, Sum, 4, 4>},
  }};
}

// The three quantised types' tables for one reduction.
template <class Sum>
const TileTable<typename Sum::Out>& TablesFor(DType type) {
  static const TileTable<typename Sum::Out> kQ8_0 = MakeTable<DType::kQ8_0, Sum>();
  static const TileTable<typename Sum::Out> kQ4_0 = MakeTable<DType::kQ4_0, Sum>();
  static const TileTable<typename Sum::Out> kQ4_1 = MakeTable<DType::kQ4_1, Sum>();
  switch (type) {
    case DType::kQ8_0: return kQ8_0;
    case DType::kQ4_0: return kQ4_0;
    case DType::kQ4_1: return kQ4_1;
    default: break;
  }
  CHECK(false) << "not a quantised dtype: " << DTypeName(type);
  return kQ8_0;
}

}  // namespace

const TileTable<float>& QuantTiles(DType type) { return TablesFor<FloatSum>(type); }
const TileTable<int64_t>& FixedPointQuantTiles(DType type) { return TablesFor<FixedSum>(type); }

}  // namespace tpserve::internal
