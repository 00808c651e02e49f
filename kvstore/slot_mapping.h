// Slot mapping: where in the paged pool each new token's K/V goes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace tpserve {

// For the n new tokens of one sequence at positions num_cached .. num_cached + n - 1:
// slots[i] = block_table[p / block_size] * block_size + p % block_size, p = num_cached + i.
// block_table: [num_table_blocks], slots: [n].
// OUT_OF_RANGE if the table does not cover position num_cached + n - 1 (a plan error);
// INVALID_ARGUMENT for a negative count or block id, or a block id >= num_pool_blocks when
// num_pool_blocks > 0. Nothing is written to slots on error.
Status ComputeSlotMapping(const int32_t* block_table, int64_t num_table_blocks, int64_t num_cached, int64_t n,
                          int64_t block_size, int32_t* slots, int64_t num_pool_blocks = 0);

// The same for a whole block table held in a vector (SequencePlan::block_table).
inline Status ComputeSlotMapping(const std::vector<int32_t>& block_table, int64_t num_cached, int64_t n,
                                 int64_t block_size, int32_t* slots, int64_t num_pool_blocks = 0) {
  return ComputeSlotMapping(block_table.data(), static_cast<int64_t>(block_table.size()), num_cached, n, block_size,
                            slots, num_pool_blocks);
}

}  // namespace tpserve
