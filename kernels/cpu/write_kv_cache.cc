#include <cstring>

#include "kernels/cpu/paged_attention.h"

namespace tpserve {

void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, float* k_cache, float* v_cache) {
  const int64_t row = num_kv_heads * head_dim;  // floats per token: [Hkv, D]
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // a padding token stores nothing
    std::memcpy(k_cache + slot * row, k + t * row, row * sizeof(float));
    std::memcpy(v_cache + slot * row, v + t * row, row * sizeof(float));
  }
}

}  // namespace tpserve
