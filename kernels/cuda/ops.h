// CUDA twins of the CPU kernels in kernels/cpu/: same arguments, device pointers, and a stream.
// Each launcher only enqueues work on `stream`; nothing synchronises. Every op is tested against
// its CPU twin in tests/gpu/cuda_kernels_test.cc.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/rope_layout.h"
#include "kernels/cpu/paged_attention.h"  // PagedAttentionArgs (here: device pointers)
#include "kernels/cpu/quantize_activations.h"  // BlockQ8Act
#include "kernels/cpu/weight_matrix.h"     // WeightMatrix (here: data is a device pointer)

namespace tpserve::cuda {

// out[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) * weight[:]; x and out may alias.
// x: [T, dim], weight: [dim], out: [T, dim]
void RmsNorm(const float* x, const float* weight, int64_t num_tokens, int64_t dim, float eps, float* out,
             cudaStream_t stream);

// In-place rotary embedding. x: [T, num_heads, head_dim], positions: [T], inv_freq: [head_dim / 2]
void ApplyRope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
               const float* inv_freq, RopeLayout layout, cudaStream_t stream);

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up. gate, up, out: [n]
void SiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// out[i] = gelu_tanh(gate[i]) * up[i] (kernels/cpu/gelu_tanh_mul.h); out may alias gate or up. gate, up, out: [n]
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// x[r, i] += bias[i] (a column-parallel layer's bias). x: [num_rows, n], bias: [n]
void AddBias(float* x, const float* bias, int64_t num_rows, int64_t n, cudaStream_t stream);

// x[i] *= s (Gemma's embedding scale). x: [n]
void Scale(float* x, int64_t n, float s, cudaStream_t stream);

// Vocab-parallel lookup (zeros outside the shard). ids: [T], out: [T, table.cols]
void EmbeddingLookup(const WeightMatrix& table, int64_t vocab_begin, const int32_t* ids, int64_t num_tokens,
                     float* out, cudaStream_t stream);

// x[i] += y[i] (the residual stream). x, y: [n]
void ResidualAdd(float* x, const float* y, int64_t n, cudaStream_t stream);

// out[r, :] = x[rows[r], :]. x: [T, dim], rows: [num_rows] (each in [0, T)), out: [num_rows, dim]
void GatherRows(const float* x, const int32_t* rows, int64_t num_rows, int64_t dim, float* out, cudaStream_t stream);

// In-place softmax of each row. x: [num_rows, n]
void Softmax(float* x, int64_t num_rows, int64_t n, cudaStream_t stream);

// Paged attention over a mixed prefill/decode batch (args.sliding_window > 0: the last that many keys of
// each token only); fixed per-(token, head) order.
// REQUIRES: head_dim <= 256.
void PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream);

// k, v: [T, Hkv, D], slot_mapping: [T] (negative: skipped), caches: [num_blocks * block_size, Hkv] rows of
// D values of kv_dtype (F32, F16, BF16 or Q8_0), rounded bit for bit as the CPU's WriteKvCache rounds them.
// PagedAttention reads the same types (args.kv_dtype).
void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, void* k_cache, void* v_cache, DType kv_dtype,
                  cudaStream_t stream);

// y[T, w.rows] = x[T, w.cols] · wᵀ. F32/F16/BF16 go through cublasGemmEx (F16/BF16 activations
// are rounded to the weight type first, f32 accumulation); quantised types through QuantMatMul.
// `cublas` must be bound to `stream` (cublasSetStream) by the caller.
void MatMul(cublasHandle_t cublas, const WeightMatrix& w, const float* x, int64_t num_tokens, float* y,
            cudaStream_t stream);

// Per-token Q8 blocks of the activations, as the CPU's QuantizeActivationRow makes them (same
// integers, scales and sums). x: [T, cols] (cols a multiple of 32), out: [T, cols / 32]
void QuantizeActivations(const float* x, int64_t num_tokens, int64_t cols, BlockQ8Act* out, cudaStream_t stream);

// Quantised weights (every quantised type) times activations quantised as above: exact integer dot
// products per 32-block (as on the CPU), f32 accumulation in a fixed order per (row, token) that
// does not depend on T, so it is batch invariant. Takes a stream-ordered scratch allocation for
// the activation blocks.
void QuantMatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, cudaStream_t stream);

}  // namespace tpserve::cuda
