#pragma once

#include <cstdint>

#include "kernels/cpu/weight_matrix.h"

namespace tpserve {

// Vocab-parallel lookup: table holds vocabulary rows [vocab_begin, vocab_begin + table.rows).
// out[t, :] = dequantised table row ids[t] - vocab_begin, or zeros when ids[t] is outside the
// shard (the all-reduce over ranks then completes every row).
// ids: [T], out: [T, table.cols]
void EmbeddingLookup(const WeightMatrix& table, int64_t vocab_begin, const int32_t* ids, int64_t num_tokens,
                     float* out);

}  // namespace tpserve
