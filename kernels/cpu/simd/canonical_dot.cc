// Dot products of one f32 vector with several (paged attention's q·k over the keys of a KV block),
// one instruction-set level. One call per block, not per key: an indirect call per 64-element dot
// cost ~15% of a batch-32 decode step.
// Canonical order (every level): the same as MatMul's float tiles (matmul_float.cc): 16 lanes from
// +0, acc[l] = fma(a[i], b[i], acc[l]) for i = l, l + 16, ... in order, the last chunk zero-padded
// (its padding fmas done too), then Fold16 (canonical_sum.h).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/level_kernels.h"

// AVX2 without AVX-512 takes four rows at once (Dot4), AVX-512 sixteen (Dot16).
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define TPSERVE_DOT16 1
#elif defined(__AVX2__) && defined(__FMA__)
#define TPSERVE_DOT4 1
#endif
#if TPSERVE_DOT16
#include "kernels/cpu/simd/transpose16_avx512.h"
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

#if TPSERVE_DOT16
// Up to sixteen rows (a whole KV block of keys) of whole 16-element chunks at once: q's chunk loaded once
// for all, then the sixteen folds done together, each Fold16's adds in its order, four rows' partial sums
// side by side in each step: b = lo8 + hi8 (row pairs in one register), s[i] = b[i] + b[i + 4] (four rows
// in one register's 128-bit lanes), then (s0 + s2) and (s1 + s3), then their sum. Rows past num_rows read
// the last row again and are not stored. (Folding one key at a time cost more than its 4 FMAs on
// 64-element heads.) kChunks > 0: n = 16 · kChunks, q held in registers; 0: any n.
template <int kChunks>
void Dot16(const float* q, const float* k, int64_t k_stride, int64_t num_rows, int64_t n, float* out) {
  __m512 acc[16];
  if constexpr (kChunks > 0) {
    // q's chunks stay in registers and each row is read through one pointer: with the chunks outside and
    // the rows inside, the sixteen row addresses did not fit the general registers and were spilled.
    __m512 qc[kChunks];
    for (int c = 0; c < kChunks; ++c) qc[c] = _mm512_loadu_ps(q + 16 * c);
    const float* row = k;
    for (int r = 0; r < 16; ++r) {
      acc[r] = _mm512_setzero_ps();
      for (int c = 0; c < kChunks; ++c) acc[r] = _mm512_fmadd_ps(qc[c], _mm512_loadu_ps(row + 16 * c), acc[r]);
      if (r + 1 < num_rows) row += k_stride;  // rows past num_rows read the last row again
    }
  } else {
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
    const int64_t last_step = (num_rows - 1) * k_stride;  // rows past num_rows stay on the last one
    for (int64_t i = 0; i < n; i += 16) {
      const __m512 qc = _mm512_loadu_ps(q + i);
      for (int r = 0; r < 16; ++r) {
        acc[r] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(k + std::min<int64_t>(r * k_stride, last_step) + i), acc[r]);
      }
    }
  }
  // pairs[p] = [b of row 2p (8 lanes) | b of row 2p + 1].
  __m512 pairs[8];
  for (int p = 0; p < 8; ++p) {
    pairs[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // quads[g]: 128-bit lane l holds s[0..3] of row 4g + l.
  __m512 quads[4];
  for (int g = 0; g < 4; ++g) {
    quads[g] = _mm512_add_ps(_mm512_shuffle_f32x4(pairs[2 * g], pairs[2 * g + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(pairs[2 * g], pairs[2 * g + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // halves[h], lane l: [s0 + s2, s1 + s3] of row 8h + l, then of row 8h + 4 + l.
  __m512 halves[2];
  for (int h = 0; h < 2; ++h) {
    halves[h] = _mm512_add_ps(_mm512_shuffle_ps(quads[2 * h], quads[2 * h + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(quads[2 * h], quads[2 * h + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Element 4l + j: the sum of row 4j + l.
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(halves[0], halves[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(halves[0], halves[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << num_rows) - 1), _mm512_permutexvar_ps(order, sums));
}
#endif

// One query against rows [0, num_rows) of k.
void DotQuery(const float* q, const float* k, int64_t k_stride, int64_t num_rows, int64_t n, float* out) {
  int64_t r = 0;
#if TPSERVE_DOT16
  // A partial group of at least kMinDot16Rows still beats one fold per key.
  constexpr int64_t kMinDot16Rows = 4;
  if (n % 16 == 0) {
    auto dot16 = n == 64 ? Dot16<4> : n == 128 ? Dot16<8> : Dot16<0>;  // the common head sizes unrolled
    for (; r + kMinDot16Rows <= num_rows; r += 16) {
      dot16(q, k + r * k_stride, k_stride, std::min<int64_t>(16, num_rows - r), n, out + r);
    }
  }
#elif TPSERVE_DOT4
  if (n % 16 == 0) {
    for (; r + 4 <= num_rows; r += 4) Dot4(q, k + r * k_stride, k_stride, n, out + r);
  }
#endif
  for (; r < num_rows; ++r) out[r] = Dot(q, k + r * k_stride, n);
}

#if TPSERVE_DOT16
// Many queries of one block (a prefill's run of tokens): the block's keys transposed once, sixteen rows at a
// time, so that a vector holds one position of sixteen keys; then each query's sixteen scores are its 16 lane
// chains side by side, chain l = fma(q[l + 16c], keys' element l + 16c, ·) over c from +0, folded by Fold16's
// tree across the chains (b = chain i + chain i + 8, s = b[i] + b[i + 4], (s0 + s2) + (s1 + s3)), every lane
// of it one key's. The fold costs 15 adds per sixteen scores instead of about 30 shuffles, and four queries
// share each load of the transposed keys. (The transposing, 64 shuffles per 256 keys' values, pays from
// about eight queries.)
constexpr int64_t kMinTransposedQueries = 8;

// Chain l of Q queries over the transposed keys kt ([16 · C][16]).
template <int Q, int C>
[[gnu::always_inline]] inline void Chain(const float* const (&q)[Q], const float* kt, int l, __m512 (&acc)[Q]) {
  for (int j = 0; j < Q; ++j) acc[j] = _mm512_setzero_ps();
  for (int c = 0; c < C; ++c) {
    const __m512 keys = _mm512_loadu_ps(kt + (l + 16 * c) * 16);
    for (int j = 0; j < Q; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j][l + 16 * c]), keys, acc[j]);
  }
}

// Lanes [lo, hi) of a query's sixteen scores (rows r0..r0 + 15 of the block) to its out.
inline void StoreScores(const QueryScores& qs, int64_t r0, __m512 scores) {
  const int64_t lo = std::max(qs.lo, r0), hi = std::min(qs.hi, r0 + 16);
  if (lo >= hi) return;
  const int shift = static_cast<int>(lo - r0);
  if (shift > 0) {
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    scores = _mm512_permutexvar_ps(_mm512_add_epi32(lanes, _mm512_set1_epi32(shift)), scores);
  }
  _mm512_mask_storeu_ps(qs.out + (lo - qs.lo), static_cast<__mmask16>((1u << (hi - lo)) - 1), scores);
}

template <int Q, int C>
void ScoreQueries(const QueryScores* qs, const float* kt, int64_t r0) {
  const float* q[Q];
  for (int j = 0; j < Q; ++j) q[j] = qs[j].q;
  // b[i] = chain i + chain i + 8, through memory: held in registers, the whole tree did not fit them.
  __m512 b[8][Q];
#pragma GCC unroll 1
  for (int i = 0; i < 8; ++i) {
    __m512 lo[Q], hi[Q];
    Chain<Q, C>(q, kt, i, lo);
    Chain<Q, C>(q, kt, i + 8, hi);
    for (int j = 0; j < Q; ++j) b[i][j] = _mm512_add_ps(lo[j], hi[j]);
  }
  for (int j = 0; j < Q; ++j) {
    __m512 s[4];
    for (int i = 0; i < 4; ++i) s[i] = _mm512_add_ps(b[i][j], b[i + 4][j]);
    StoreScores(qs[j], r0, _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
  }
}

template <int C>
void DotQueriesTransposed(const QueryScores* queries, int64_t num_queries, const float* k, int64_t k_stride) {
  int64_t num_rows = 0;
  for (int64_t j = 0; j < num_queries; ++j) num_rows = std::max(num_rows, queries[j].hi);
  alignas(64) float kt[16 * C * 16];
  for (int64_t r0 = 0; r0 < num_rows; r0 += 16) {
    const int64_t rows = std::min<int64_t>(16, num_rows - r0);
    for (int c = 0; c < C; ++c) {
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = i < rows ? _mm512_loadu_ps(k + (r0 + i) * k_stride + 16 * c) : _mm512_setzero_ps();
      }
      TransposeFloats16(r);
      for (int p = 0; p < 16; ++p) _mm512_store_ps(kt + (16 * c + p) * 16, r[p]);
    }
    int64_t j = 0;
    for (; j + 4 <= num_queries; j += 4) ScoreQueries<4, C>(queries + j, kt, r0);
    switch (num_queries - j) {
      case 3: ScoreQueries<3, C>(queries + j, kt, r0); break;
      case 2: ScoreQueries<2, C>(queries + j, kt, r0); break;
      case 1: ScoreQueries<1, C>(queries + j, kt, r0); break;
      default: break;
    }
  }
}
#endif

}  // namespace

void DotRows(const QueryScores* queries, int64_t num_queries, const float* k, int64_t k_stride, int64_t n) {
#if TPSERVE_DOT16
  if (num_queries >= kMinTransposedQueries && (n == 64 || n == 128)) {  // the common head sizes
    return n == 64 ? DotQueriesTransposed<4>(queries, num_queries, k, k_stride)
                   : DotQueriesTransposed<8>(queries, num_queries, k, k_stride);
  }
#endif
  for (int64_t j = 0; j < num_queries; ++j) {
    const QueryScores& qs = queries[j];
    DotQuery(qs.q, k + qs.lo * k_stride, k_stride, qs.hi - qs.lo, n, qs.out);
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
