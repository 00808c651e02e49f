// Internal to kernels/cpu/simd: the functions every level defines in its own namespace
// (TPSERVE_ISA_NS = isa_portable, isa_avx2 or isa_avx512), gathered by kernel_table.cc into
// that level's IsaKernels (kernels/cpu/isa_kernels.h).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

const TileTable<float>& FloatTiles(DType type);              // matmul_float.cc
const TileTable<int64_t>& FixedPointFloatTiles(DType type);  // matmul_float.cc
const TileTable<float>& QuantTiles(DType type);              // matmul_quant.cc
const TileTable<int64_t>& FixedPointQuantTiles(DType type);  // matmul_quant.cc
void QuantizeActivationRow(const float* x, int64_t n, BlockQ8Act* dst);  // quantize_activations.cc
void DotRows(const QueryScores* queries, int64_t num_queries, const float* k, int64_t k_stride,
             int64_t n);  // canonical_dot.cc
void DequantizeKvRow(DType type, const uint8_t* src, int64_t n, float* dst);  // dequantize_kv.cc
void ExpScores(float* s, const int64_t* lengths, int64_t rows, float scale, float* sums);  // attention_rows.cc
void AccumulateRows(const float* const* w, int64_t num_outputs, const float* v, int64_t v_stride, int64_t num_rows,
                    int64_t n, float* const* out);  // attention_rows.cc
void SiluMulRows(const float* gate, const float* up, int64_t n, float* out);      // gated_activations.cc
void GeluTanhMulRows(const float* gate, const float* up, int64_t n, float* out);  // gated_activations.cc

}  // namespace tpserve::internal::TPSERVE_ISA_NS
