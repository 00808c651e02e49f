#include "kvstore/slot_mapping.h"

#include <string>

namespace tpserve {

Status ComputeSlotMapping(const int32_t* block_table, int64_t num_table_blocks, int64_t num_cached, int64_t n,
                          int64_t block_size, int32_t* slots, int64_t num_pool_blocks) {
  if (num_cached < 0 || n < 0 || block_size <= 0 || num_table_blocks < 0) {
    return InvalidArgument("slot mapping: bad arguments num_cached=" + std::to_string(num_cached) +
                           " n=" + std::to_string(n) + " block_size=" + std::to_string(block_size));
  }
  if (n == 0) return OkStatus();
  const int64_t needed = (num_cached + n - 1) / block_size + 1;
  if (needed > num_table_blocks) {
    return OutOfRange("block table of " + std::to_string(num_table_blocks) + " blocks cannot hold position " +
                      std::to_string(num_cached + n - 1) + " (needs " + std::to_string(needed) + ")");
  }
  for (int64_t b = num_cached / block_size; b < needed; ++b) {
    if (block_table[b] < 0 || (num_pool_blocks > 0 && block_table[b] >= num_pool_blocks)) {
      return InvalidArgument("block table entry " + std::to_string(b) + " = " + std::to_string(block_table[b]) +
                             " is not a block of the pool");
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = num_cached + i;
    slots[i] = static_cast<int32_t>(block_table[p / block_size] * block_size + p % block_size);
  }
  return OkStatus();
}

}  // namespace tpserve
