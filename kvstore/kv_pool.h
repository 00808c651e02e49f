// KvPool: one rank's block-paged key/value cache, the memory the block tables index. Its "layers" are
// the layers of one page (kvstore/kv_layout.h: every model layer, or one layer group's) and its blocks
// are pages. Layout [L][2][num_blocks][block_size][Hkv][D] f32, 64-byte aligned: one layer's K (or V) is a
// contiguous [num_blocks, block_size, Hkv, D] array, which is what PagedAttention and WriteKvCache take.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tpserve {

struct KvPoolShape {
  int64_t num_layers = 0;    // L
  int64_t num_kv_heads = 0;  // Hkv on this rank
  int64_t head_dim = 0;      // D
  int64_t block_size = 16;   // tokens per block
  int64_t num_blocks = 0;
};

class KvPool {
 public:
  static constexpr int64_t kDefaultBlockSize = 16;

  // Bytes of one block across all layers, K and V: L * 2 * block_size * Hkv * D * 4.
  static int64_t BlockBytes(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t block_size);
  // How many blocks fit in `bytes` (0 if not even one does).
  static int64_t BlocksForBudget(int64_t bytes, int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                                 int64_t block_size = kDefaultBlockSize);

  // INVALID_ARGUMENT for a non-positive dimension; RESOURCE_EXHAUSTED if the memory cannot be had.
  // The memory starts zeroed.
  static StatusOr<std::unique_ptr<KvPool>> Create(const KvPoolShape& shape);

  const KvPoolShape& shape() const { return shape_; }
  int64_t num_blocks() const { return shape_.num_blocks; }
  int64_t block_size() const { return shape_.block_size; }
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  int64_t total_bytes() const { return total_floats_ * static_cast<int64_t>(sizeof(float)); }

  // One layer's caches, each [num_blocks, block_size, Hkv, D]. REQUIRES: 0 <= layer < L.
  float* KeyCache(int64_t layer);
  float* ValueCache(int64_t layer);
  const float* KeyCache(int64_t layer) const;
  const float* ValueCache(int64_t layer) const;

  // Copies block src to block dst in every layer, K and V (copy-on-write of a shared prefix block).
  // INVALID_ARGUMENT if either id is outside [0, num_blocks).
  Status CopyBlock(int64_t src, int64_t dst);

 private:
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  explicit KvPool(const KvPoolShape& shape, std::unique_ptr<float, FreeDeleter> data, int64_t total_floats);
  int64_t LayerFloats() const;  // floats of one layer's K (or V): num_blocks * block_size * Hkv * D

  KvPoolShape shape_;
  std::unique_ptr<float, FreeDeleter> data_;
  int64_t total_floats_;
};

}  // namespace tpserve
