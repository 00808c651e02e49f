#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/paged_attention.h"

namespace tpserve {

void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, void* k_cache, void* v_cache, DType kv_dtype) {
  const int64_t row = num_kv_heads * head_dim;              // values per token: [Hkv, D]
  const int64_t row_bytes = DTypeRowBytes(kv_dtype, row);  // D is whole blocks, so blocks never span heads
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // a padding token stores nothing
    auto* k_dst = static_cast<uint8_t*>(k_cache) + slot * row_bytes;
    auto* v_dst = static_cast<uint8_t*>(v_cache) + slot * row_bytes;
    if (kv_dtype == DType::kF32) {
      std::memcpy(k_dst, k + t * row, row_bytes);
      std::memcpy(v_dst, v + t * row, row_bytes);
    } else {
      QuantizeRow(kv_dtype, k + t * row, k_dst, row);
      QuantizeRow(kv_dtype, v + t * row, v_dst, row);
    }
  }
}

}  // namespace tpserve
