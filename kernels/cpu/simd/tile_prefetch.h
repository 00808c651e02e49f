// Internal to the matmul tiles and panels of the SIMD levels (kernels/cpu/simd/matmul_quant.cc, matmul_float.cc,
// quant_panel.h, float_panel.h): the software prefetch of the weight rows they stream.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tpserve::internal::TPSERVE_ISA_NS {

// How far ahead of its reads a decode pass through the weights asks for lines: the row streams
// (matmul_float.cc's FloatRowStream, fixed_row_stream_avx512.h, quant_row_stream_avx512.h) this many bytes on,
// the tiles below at least this many bytes of their rows on. Far enough for the lines to arrive in time is
// one core's bandwidth times the memory's latency: about 2.6 KB on the Sapphire Rapids VM (20 GB/s per core),
// 5 KB on the Zen 5 one (35 GB/s). 8 KB covers both with room; it is a sixth of the smaller L1 (48 KB).
// Zen 5, one thread, Q4_1 row quads (1440-byte tiles) one tile -> 8 KB ahead, us per call: 576 x 1536
// 34.7 -> 18.8, 1536 x 576 22.7 -> 18.7; the Q8_0 row stream 2048 -> 8192 bytes ahead: 8192 x 2048
// 756 -> 647 (bench/README.md, "Prefetch distance on a Zen 5 VM").
inline constexpr int64_t kPrefetchAheadBytes = 8192;

// Software prefetch for a tile of NR adjacent rows of kBytes256 bytes per 256 values, told the column its
// tile has reached (it acts every 256 values; a linear tile every kStepCols, the quantised ones each block, so
// that a few lines are asked for at every step rather than 44 at every eighth: SmolLM2 Q5_0 decode at one
// thread 230 -> 247 tok/s, Q4_1 258 -> 272, bench/README.md "Decode over sixteen rows").
// - A tile of up to kLinearPrefetchBytes: the bytes kPrefetchAheadBytes on (at least the next tile's) in
//   address order, as many per 256 values as the tile reads, so that the tiles' requests join into one
//   stream that runs that far ahead of their reads (RunTiles walks adjacent rows NR at a time). Per row,
//   256 values ahead would not leave a short row: SmolLM2's 576-column rows are 2.25 × 256 values, so most
//   of those requests would fall on rows already being read.
// - A longer tile: with kRowAhead (the quantised tiles) each row's 256 values that lie kPrefetchAheadBytes
//   ÷ NR on (at least two 256-value steps); the float tiles leave long rows to the hardware prefetcher
//   (F16 2048 x 8192: 3.2 ns per 32 values without, 4.2 with).
// - A single row: nothing; it is one sequential stream, which the hardware prefetcher follows best.
// One thread, weights cycled out of the cache, ns per 32 weights of a row, without -> with (bench/README.md,
// "Decode over four rows"; the next tile then): Q4_1 1536 x 576 1.90 -> 1.32, 576 x 1536 (fixed point)
// 3.54 -> 1.34; Q6_K 576 x 1536 6.05 -> 2.20; Q4_K 2048 x 8192 2.69 -> 2.57; F16 1536 x 576 6.9 -> 4.7,
// 576 x 1536 5.1 -> 3.9. 32 KB, not 16 (Zen 5, one thread, us per call, weights from memory): a 16-row quad
// pass over 1536-column Q5_0 rows (17 KB) 50 -> 22, and the K-quants' four-row tiles of the 1B model's 8192
// columns (18-27 KB), whose rows are only read two 256-value steps ahead otherwise: Q4_K 819-876 -> 453,
// Q6_K 1393-1414 -> 628 (bench/README.md, "Decode over sixteen rows").
inline constexpr int64_t kLinearPrefetchBytes = 32768;

// One prefetcht0. Not _mm_prefetch: GCC 12 finds a function whose only effect is a prefetch free of side
// effects, marks it const and deletes its calls before inlining them, so no prefetch was ever emitted here
// (the objects had none until this). It must keep an asm volatile, with the address in a register: a
// memory operand ("m"(*p)) tells GCC the asm reads memory, which may be the tile's accumulators, so every
// accumulator was stored to the stack before each prefetch (4 x 4 tiles: 16 stores per 16 multiply-adds).
inline void PrefetchLine(const char* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }
// Every line whose start lies in [begin, end): consecutive ranges ask for each line once.
inline void PrefetchLinesStartingIn(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = (begin + 63) & ~uintptr_t{63}; line < end; line += 64) {
    PrefetchLine(reinterpret_cast<const char*>(line));
  }
}
// The lines starting in the `bytes` bytes kPrefetchAheadBytes past p: a one-row stream's request for what it
// reads next, consecutive calls asking for each line once.
inline void PrefetchStreamAhead(const void* p, int64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + kPrefetchAheadBytes;
  PrefetchLinesStartingIn(at, at + bytes);
}
// The same into L2 only (prefetcht1).
inline void PrefetchLineL2(const char* p) { asm volatile("prefetcht1 (%0)" : : "r"(p)); }

// A panel's passes over its tokens (quant_panel.h, float_panel.h) ask for the next panel's rows, `bytes` from
// `next`, a slice per pass: slice `pass` of `passes`. They arrive from memory while the tokens pass over this
// panel; its unpack or packing waited on them before (SmolLM2 Q4_1 decode at B = 64: 15 % of the step, the
// samples on the rows' first loads). Past the matrix or this thread's rows the requests are wasted, not
// faults.
inline void PrefetchPanelSlice(const uint8_t* next, int64_t bytes, int64_t pass, int64_t passes) {
  const int64_t slice = ((bytes + passes - 1) / passes + 63) / 64 * 64;
  const int64_t end = std::min(bytes, (pass + 1) * slice);
  for (int64_t off = pass * slice; off < end; off += 64) PrefetchLineL2(reinterpret_cast<const char*>(next) + off);
}

template <int64_t kBytes256, int NR, bool kRowAhead, int64_t kStepCols = 256>
class TilePrefetch {
 public:
  TilePrefetch(const uint8_t* w, int64_t row_bytes)
      : w_(w),
        row_bytes_(row_bytes),
        linear_(NR * row_bytes <= kLinearPrefetchBytes),
        ahead_(std::max(kPrefetchAheadBytes, NR * row_bytes)) {}
  // Always inlined: a call would make the tile save and restore its vector registers around it.
  [[gnu::always_inline]] void At(int64_t col) const {
    if (NR == 1) return;
    if (linear_) {
      if (col % kStepCols != 0) return;
      const uintptr_t next = reinterpret_cast<uintptr_t>(w_ + ahead_);
      PrefetchLinesStartingIn(next + NR * col * kBytes256 / 256, next + NR * (col + kStepCols) * kBytes256 / 256);
      return;
    }
    if (col % 256 != 0) return;
    if (!kRowAhead) return;
    for (int r = 0; r < NR; ++r) {
      const char* next = reinterpret_cast<const char*>(w_ + r * row_bytes_) + (col / 256 + kStepsAhead) * kBytes256;
      for (int64_t off = 0; off < kBytes256; off += 64) PrefetchLine(next + off);
    }
  }

 private:
  const uint8_t* w_;
  int64_t row_bytes_;
  bool linear_;
  int64_t ahead_;  // bytes from the tile's start to what it asks for
  static constexpr int64_t kStepsAhead = std::max<int64_t>(2, kPrefetchAheadBytes / (NR * kBytes256));
};

}  // namespace tpserve::internal::TPSERVE_ISA_NS
