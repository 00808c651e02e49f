// Matrix multiply of activations by a weight matrix kept in its stored type (F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K): prefill's matrix-matrix shape and decode's matrix-vector shape.
#pragma once

#include <cstdint>
#include <span>

#include "common/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace tpserve {

// y[T, w.rows] = x[T, w.cols] · wᵀ.
// Batch invariant: the summation order of every y[t, r] depends only on w.cols, never on T,
// the thread count or the other rows of x, so a token's result is bitwise the same in any batch.
// Quantised weights are never expanded in memory: activations are quantised to Q8 blocks per
// token and dotted with integer arithmetic per 32-value block (K-quants per 32-value group), as ggml does.
// BF16 weights take the activations rounded to bf16, and their sums flush denormals to zero, as AVX512-BF16's
// dot product computes them (README "Decisions").
void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool* pool);

// The same for several weights that read one x (Q, K and V; gate and up), in one round of thread-pool
// dispatches, without stacking them in memory: ys[i][T, parts[i].rows] = x · parts[i]ᵀ, each bitwise what
// MatMul(parts[i], ...) gives. REQUIRES: parts non-empty, of one type and one cols; ys.size() == parts.size().
void MatMulParts(std::span<const WeightMatrix> parts, const float* x, int64_t num_tokens, std::span<float* const> ys,
                 ThreadPool* pool);

}  // namespace tpserve
