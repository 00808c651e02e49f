// Internal to kernels/cpu/simd/matmul_quant.cc, the AVX2 and AVX-512 levels: prefill (the level's
// kQuantPanelMinTokens or more) over panels of 16 weight rows (quant_panel_block.h), unpacked once per call
// and passed over by every token: panel_tokens_avx512.h (VNNI, 16 rows a vector) and panel_tokens_avx2.h
// (maddubs + madd, 8 rows a vector). The 8-lane tiles unpack each weight block again for every tile of up to
// 4 tokens and spend a horizontal fold per block and output; a panel unpacks once for all the tokens, and its
// accumulators hold one output per lane, so a block's total is plain vector adds.
//
// Every output sees exactly the operations of matmul_quant.cc's canonical order: the same exact
// integer block total, the same f32 products d_w · d_a, one fma per block in block order and the
// offset sum beside it; for the fixed-point sums the same term per block, rounded to int64 the same
// way. The ISA equality test holds each level to the portable one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/tile_prefetch.h"

#if TPSERVE_QUANT_AVX512
#define TPSERVE_QUANT_PANELS 1
#include "kernels/cpu/simd/panel_tokens_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TPSERVE_QUANT_PANELS 1
#include "kernels/cpu/simd/panel_tokens_avx2.h"
#endif

#if TPSERVE_QUANT_PANELS
namespace tpserve::internal::TPSERVE_ISA_NS {

// PanelPrepareFn (matmul_tile.h): every token's activation blocks as the panels read them, once per call
// (read again per panel, they took 14 % of SmolLM2 Q4_1's prefill).
template <DType kType>
const uint8_t* PrepareActivations(const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols,
                                  int64_t* prepared_stride) {
  const int64_t num_blocks = cols / kQuantBlock;
  thread_local std::vector<PanelActivation> scratch;  // [T][cols / 32], reused across calls
  if (static_cast<int64_t>(scratch.size()) < num_tokens * num_blocks) scratch.resize(num_tokens * num_blocks);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto* xt = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride);
    PanelActivation* at = scratch.data() + t * num_blocks;
    for (int64_t b = 0; b < num_blocks; ++b) ReadActivation<kType, ShiftsActivations(kType)>(xt[b], &at[b]);
  }
  *prepared_stride = num_blocks * static_cast<int64_t>(sizeof(PanelActivation));
  return reinterpret_cast<const uint8_t*>(scratch.data());
}

// nt (<= NT) tokens' pass over the panel: a and y the first token's.
template <DType kType, class Out, int NT>
void PanelTokens(int nt, const PanelBlock* blocks, int64_t num_blocks, const PanelActivation* a, int num_rows, Out* y,
                 int64_t y_stride) {
  if constexpr (NT > 1) {
    if (nt < NT) return PanelTokens<kType, Out, NT - 1>(nt, blocks, num_blocks, a, num_rows, y, y_stride);
  }
  const PanelActivation* as[NT];
  Out* ys[NT];
  for (int t = 0; t < NT; ++t) {
    as[t] = a + t * num_blocks;
    ys[t] = y + t * y_stride;
  }
  using Sums = std::conditional_t<std::is_same_v<Out, float>, FloatPanelSums<kType, NT>, FixedPanelSums<kType, NT>>;
  PanelPass<kType, Sums, NT>(blocks, num_blocks, as, num_rows, ys);
}

// PanelFn (matmul_tile.h): unpacks the panel, then passes every token (x: PrepareActivations') over it.
template <DType kType, class Out>
void QuantPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride) {
  constexpr int NT = kPanelTokens<Out>;
  const int64_t num_blocks = cols / kQuantBlock;
  thread_local std::vector<PanelBlock> scratch;  // [cols / 32], reused across calls
  if (static_cast<int64_t>(scratch.size()) < num_blocks) scratch.resize(num_blocks);
  UnpackPanel<kType>(w, row_bytes, num_rows, num_blocks, std::is_same_v<Out, float> ? 1.0f : kFixedPointScale,
                     scratch.data());
  const int64_t passes = (num_tokens + NT - 1) / NT;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += NT) {
    PrefetchPanelSlice(w + kPanelRows * row_bytes, kPanelRows * row_bytes, t0 / NT, passes);  // the next panel
    const int nt = static_cast<int>(std::min<int64_t>(NT, num_tokens - t0));
    PanelTokens<kType, Out, NT>(nt, scratch.data(), num_blocks,
                                reinterpret_cast<const PanelActivation*>(x + t0 * x_stride), num_rows,
                                y + t0 * y_stride, y_stride);
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
#endif
