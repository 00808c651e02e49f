// Fixed-point matrix multiply, for sums that must not depend on how the columns are split: the
// row-parallel layers (attention output, FFN down), whose per-rank partial products are summed
// across ranks. Every TP degree then adds the same integers and gets the same bits.
//
// y[t, r] = Σ_k w[r, k] · x[t, k] is produced as an int64 in units of 2^-32 (kFixedPointFracBits).
// The columns are taken in chunks — the 32-element quantisation block for quantised weights,
// 16 columns for float weights — and each chunk's contribution is rounded to nearest (ties to even)
// into integers:
//   quantised: one term per 32-value block, RNE(f32(Σ_j scale_h·qw[j]·qa[j]) · f32(d_w·2^32·d_a)
//              [+ f32(m·2^32·Σa), offset types] [+ f32(Σ_j min_h·qa[j]) · f32(−dmin·2^32·d_a), Q2_K]),
//              the integer dots exact (|Σ| < 2^24, so their f32 is exact too; simd/matmul_quant.cc);
//   float:     one term per chunk at c, RNE(S · 2^32), S the f32 fma chain S = w[c] · x[c],
//              S = fma(w[c + i], x[c + i], S) for i = 1..15 (one chain per output holds in a register
//              whether the rows, the tokens or nothing lie in the vector lanes; simd/matmul_float.cc).
// Integer addition is exact and order-free, so a matrix split into column ranges at chunk
// boundaries (multiples of 32 columns, or of 16 for float weights; a K-quant's data can only be
// sliced at its 256-value super-blocks), multiplied piecewise and summed
// as int64 — on one rank or across ranks, in any order — equals the whole matrix's result bit for
// bit. Every instruction path (AVX-512, AVX2, portable) gives the same integers, and like MatMul
// the result is batch invariant.
//
// Range and resolution: each rounded term is within 2^-33 (≈1.2e-10) of its f32 value; the result
// is exact as long as every term and every partial sum stays below 2^50 units, i.e. 2^18 = 262144
// in value. FixedPointRange (kernels/cpu/fixed_point_range.h) checks a bound on that before a
// multiply; beyond it the integers are unspecified (wrapped or saturated, never undefined behaviour).
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace tpserve {

inline constexpr int kFixedPointFracBits = 32;
inline constexpr float kFixedPointScale = 0x1p32f;         // 2^kFixedPointFracBits
inline constexpr float kFixedPointMaxMagnitude = 0x1p18f;  // |y| and every partial below this are exact

// y_fixed[T, w.rows] = x[T, w.cols] · wᵀ in fixed point (see above). For float weights cols need
// not be a multiple of 16 (the last chunk is zero-padded). Assumes the default FP rounding mode.
void MatMulFixedPoint(const WeightMatrix& w, const float* x, int64_t num_tokens, int64_t* y_fixed,
                      ThreadPool* pool);

// out[n] = fixed[n] · 2^-32, rounded once to f32 (nearest even).
void FixedPointToFloat(const int64_t* fixed, int64_t n, float* out);

}  // namespace tpserve
