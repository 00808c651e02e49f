// KvPool: one rank's block-paged key/value cache, the memory the block tables index. Its "layers" are
// the layers of one page (kvstore/kv_layout.h: every model layer, or one layer group's) and its blocks
// are pages. Layout [L][2][num_blocks][block_size][Hkv] rows of D values in the pool's element type
// (f32, f16, bf16, or q8_0: ggml's blocks of 32 int8 with an f16 scale), 64-byte aligned: one layer's K
// (or V) is a contiguous [num_blocks, block_size, Hkv] array of rows, what PagedAttention and
// WriteKvCache take.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace tpserve {

// The KV cache's element types: F32, F16, BF16, Q8_0.
bool IsKvDType(DType type);
// "f32", "f16", "bf16", "q8_0" (any case) -> the type; INVALID_ARGUMENT naming the choices otherwise.
StatusOr<DType> ParseKvDType(const std::string& name);

struct KvPoolShape {
  int64_t num_layers = 0;    // L
  int64_t num_kv_heads = 0;  // Hkv on this rank
  int64_t head_dim = 0;      // D
  int64_t block_size = 16;   // tokens per block
  int64_t num_blocks = 0;
  DType dtype = DType::kF32;
};

class KvPool {
 public:
  static constexpr int64_t kDefaultBlockSize = 16;

  // Bytes of one row (one token's K or V of one head): D values of `dtype`.
  static int64_t RowBytes(int64_t head_dim, DType dtype);
  // Bytes of one block across all layers, K and V: L * 2 * block_size * Hkv * RowBytes.
  static int64_t BlockBytes(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                            DType dtype = DType::kF32);
  // OK when rows of head_dim values can be stored as `dtype`: INVALID_ARGUMENT naming the KV types, or the
  // type's block (32 values for q8_0) that head_dim is not a multiple of.
  static Status CheckType(int64_t head_dim, DType dtype);
  // How many blocks fit in `bytes` (0 if not even one does, or the type cannot store rows of head_dim).
  static int64_t BlocksForBudget(int64_t bytes, int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                                 int64_t block_size = kDefaultBlockSize, DType dtype = DType::kF32);

  // INVALID_ARGUMENT for a non-positive dimension, a type that is not a KV type, or a head dim that is
  // not a multiple of the type's block (32 for q8_0); RESOURCE_EXHAUSTED if the memory cannot be had.
  // The memory starts zeroed, and is only mapped: a page becomes resident when a block on it is first
  // written, so an idle pool costs no RSS and creating one costs no time (an eager memset of the default
  // pool took longer than reading the model).
  static StatusOr<std::unique_ptr<KvPool>> Create(const KvPoolShape& shape);

  const KvPoolShape& shape() const { return shape_; }
  int64_t num_blocks() const { return shape_.num_blocks; }
  int64_t block_size() const { return shape_.block_size; }
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  int64_t total_bytes() const { return total_bytes_; }

  // One layer's caches, each [num_blocks, block_size, Hkv] rows. REQUIRES: 0 <= layer < L.
  void* KeyCache(int64_t layer);
  void* ValueCache(int64_t layer);
  const void* KeyCache(int64_t layer) const;
  const void* ValueCache(int64_t layer) const;

  // Copies block src to block dst in every layer, K and V (copy-on-write of a shared prefix block).
  // INVALID_ARGUMENT if either id is outside [0, num_blocks).
  Status CopyBlock(int64_t src, int64_t dst);

 private:
  struct Unmapper {
    size_t bytes = 0;  // of the mapping
    void operator()(uint8_t* p) const;
  };
  explicit KvPool(const KvPoolShape& shape, std::unique_ptr<uint8_t, Unmapper> data, int64_t total_bytes);
  int64_t BlockStride() const;  // bytes of one block of one layer's K (or V): block_size * Hkv * RowBytes
  int64_t LayerBytes() const;   // bytes of one layer's K (or V): num_blocks * BlockStride()

  KvPoolShape shape_;
  std::unique_ptr<uint8_t, Unmapper> data_;
  int64_t total_bytes_;
};

}  // namespace tpserve
