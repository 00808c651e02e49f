// Internal to kernels/cpu: the kernels compiled once per instruction-set level (kernels/cpu/simd/,
// built into the namespaces isa_portable, isa_avx2 and isa_avx512 by kernels/CMakeLists.txt),
// and ActiveKernels(), the table of the level ActiveIsa() chose.
// Every entry of every level gives bitwise the same results: each kernel has one canonical
// order of operations (documented beside it) and the portable level is that order written out
// in scalar code, which the SIMD levels are tested against (tests/kernels/isa_equality_test.cc).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"

namespace tpserve::internal {

// One query's scores against rows [lo, hi) of a block of keys: out[r − lo] = q · key r.
struct QueryScores {
  const float* q;
  float* out;
  int64_t lo, hi;
};

struct IsaKernels {
  const TileTable<float>& (*float_tiles)(DType type);            // F32, F16, BF16 weights × f32 activations
  const TileTable<float>& (*quant_tiles)(DType type);            // Q8_0, Q4_0, Q4_1 × BlockQ8Act activations
  const TileTable<int64_t>& (*fixed_point_float_tiles)(DType);  // as float_tiles, fixed-point output
  const TileTable<int64_t>& (*fixed_point_quant_tiles)(DType);  // as quant_tiles, fixed-point output
  void (*quantize_activation_row)(const float* x, int64_t n, BlockQ8Act* dst);  // QuantizeActivationRow
  // For each query: out[r − lo] = Σ_i q[i]·k[r·k_stride + i] over i < n, for r in [lo, hi), each in the
  // 16-lane order (canonical_dot.cc). Several queries of one block in one call let the level share work
  // among them.
  void (*dot_rows)(const QueryScores* queries, int64_t num_queries, const float* k, int64_t k_stride, int64_t n);
  // One KV cache row of n values of `type` (F32, F16, BF16, Q8_0) as f32: DequantizeRow's bits (dequantize_kv.cc).
  void (*dequantize_kv_row)(DType type, const uint8_t* src, int64_t n, float* dst);
  // Paged attention's softmax numerators in place, for `rows` rows one after another, row r of lengths[r]
  // scores: per row s[j] = exp(s[j]·scale − max), and sums[r] = Σ s[j] in 16 lanes folded by Fold16
  // (attention_rows.cc). REQUIRES: scale > 0.
  void (*exp_scores)(float* s, const int64_t* lengths, int64_t rows, float scale, float* sums);
  // For each output o < num_outputs and i < n: out[o][i] = fma(w[o][r], v[r·v_stride + i], out[o][i]) for
  // r < num_rows in order (attention_rows.cc).
  void (*accumulate_rows)(const float* const* w, int64_t num_outputs, const float* v, int64_t v_stride,
                          int64_t num_rows, int64_t n, float* const* out);
  // SiluMul and GeluTanhMul (gated_activations.cc).
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  void (*gelu_tanh_mul)(const float* gate, const float* up, int64_t n, float* out);
};

namespace isa_portable {
const IsaKernels& Kernels();
}
namespace isa_avx2 {
const IsaKernels& Kernels();
}
namespace isa_avx512 {
const IsaKernels& Kernels();
}
// simd/matmul_float.cc compiled with AVX512-BF16 (kernels/CMakeLists.txt): the avx512bf16 level's float
// weights' tables (BF16 panels through VDPBF16PS); its other kernels are the avx512 level's.
namespace isa_avx512bf16 {
const TileTable<float>& FloatTiles(DType type);
const TileTable<int64_t>& FixedPointFloatTiles(DType type);
}

// The table of `isa`. REQUIRES: IsaCompiledIn(isa).
const IsaKernels& KernelsFor(Isa isa);
inline const IsaKernels& ActiveKernels() { return KernelsFor(ActiveIsa()); }

}  // namespace tpserve::internal
