#include "kvstore/kv_pool.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace tpserve {

namespace {
constexpr size_t kAlignment = 64;
}  // namespace

void KvPool::FreeDeleter::operator()(float* p) const { std::free(p); }

int64_t KvPool::BlockBytes(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t block_size) {
  return num_layers * 2 * block_size * num_kv_heads * head_dim * static_cast<int64_t>(sizeof(float));
}

int64_t KvPool::BlocksForBudget(int64_t bytes, int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                                int64_t block_size) {
  const int64_t per_block = BlockBytes(num_layers, num_kv_heads, head_dim, block_size);
  if (per_block <= 0 || bytes <= 0) return 0;
  return bytes / per_block;
}

StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const KvPoolShape& shape) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 || shape.block_size <= 0 ||
      shape.num_blocks <= 0) {
    return InvalidArgument("KV pool needs positive layers, kv heads, head dim, block size and blocks; got L=" +
                           std::to_string(shape.num_layers) + " Hkv=" + std::to_string(shape.num_kv_heads) +
                           " D=" + std::to_string(shape.head_dim) + " block_size=" +
                           std::to_string(shape.block_size) + " blocks=" + std::to_string(shape.num_blocks));
  }
  const int64_t per_block_floats = BlockBytes(shape.num_layers, shape.num_kv_heads, shape.head_dim,
                                              shape.block_size) / static_cast<int64_t>(sizeof(float));
  if (shape.num_blocks > std::numeric_limits<int64_t>::max() / 8 / per_block_floats) {
    return ResourceExhausted("KV pool of " + std::to_string(shape.num_blocks) + " blocks overflows the address space");
  }
  const int64_t total_floats = per_block_floats * shape.num_blocks;
  size_t bytes = static_cast<size_t>(total_floats) * sizeof(float);
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto* p = static_cast<float*>(std::aligned_alloc(kAlignment, bytes));
  if (p == nullptr) {
    return ResourceExhausted("cannot allocate a KV pool of " + std::to_string(bytes) + " bytes");
  }
  std::memset(p, 0, bytes);
  return std::unique_ptr<KvPool>(new KvPool(shape, std::unique_ptr<float, FreeDeleter>(p), total_floats));
}

KvPool::KvPool(const KvPoolShape& shape, std::unique_ptr<float, FreeDeleter> data, int64_t total_floats)
    : shape_(shape), data_(std::move(data)), total_floats_(total_floats) {}

int64_t KvPool::LayerFloats() const {
  return shape_.num_blocks * shape_.block_size * shape_.num_kv_heads * shape_.head_dim;
}

float* KvPool::KeyCache(int64_t layer) {
  CHECK(layer >= 0 && layer < shape_.num_layers) << "layer " << layer;
  return data_.get() + (2 * layer) * LayerFloats();
}
float* KvPool::ValueCache(int64_t layer) {
  CHECK(layer >= 0 && layer < shape_.num_layers) << "layer " << layer;
  return data_.get() + (2 * layer + 1) * LayerFloats();
}
const float* KvPool::KeyCache(int64_t layer) const { return const_cast<KvPool*>(this)->KeyCache(layer); }
const float* KvPool::ValueCache(int64_t layer) const { return const_cast<KvPool*>(this)->ValueCache(layer); }

Status KvPool::CopyBlock(int64_t src, int64_t dst) {
  if (src < 0 || src >= shape_.num_blocks || dst < 0 || dst >= shape_.num_blocks) {
    return InvalidArgument("block copy " + std::to_string(src) + " -> " + std::to_string(dst) +
                           " outside the pool of " + std::to_string(shape_.num_blocks) + " blocks");
  }
  if (src == dst) return OkStatus();
  const int64_t block_floats = shape_.block_size * shape_.num_kv_heads * shape_.head_dim;
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer) {
    for (float* base : {KeyCache(layer), ValueCache(layer)}) {
      std::memcpy(base + dst * block_floats, base + src * block_floats, block_floats * sizeof(float));
    }
  }
  return OkStatus();
}

}  // namespace tpserve
