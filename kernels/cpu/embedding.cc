#include "kernels/cpu/embedding.h"

#include <cstring>

#include "common/dtype.h"

namespace tpserve {

void EmbeddingLookup(const WeightMatrix& table, int64_t vocab_begin, const int32_t* ids, int64_t num_tokens,
                     float* out) {
  const int64_t row_bytes = DTypeRowBytes(table.type, table.cols);
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* ot = out + t * table.cols;
    const int64_t local = static_cast<int64_t>(ids[t]) - vocab_begin;
    if (local < 0 || local >= table.rows) {
      std::memset(ot, 0, table.cols * sizeof(float));
      continue;
    }
    DequantizeRow(table.type, static_cast<const uint8_t*>(table.data) + local * row_bytes, ot, table.cols);
  }
}

}  // namespace tpserve
