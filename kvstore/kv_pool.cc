#include "kvstore/kv_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace tpserve {

void KvPool::Unmapper::operator()(uint8_t* p) const { munmap(p, bytes); }

bool IsKvDType(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kBF16 || type == DType::kQ8_0;
}

Status KvPool::CheckType(int64_t head_dim, DType dtype) {
  if (!IsKvDType(dtype)) {
    return InvalidArgument(std::string("KV cache type ") + DTypeName(dtype) +
                           " is not supported; supported: f32, f16, bf16, q8_0");
  }
  if (head_dim % DTypeBlockElems(dtype) != 0) {
    return InvalidArgument(std::string("KV cache type ") + DTypeName(dtype) + " stores blocks of " +
                           std::to_string(DTypeBlockElems(dtype)) + " values; head dim " + std::to_string(head_dim) +
                           " is not a multiple");
  }
  return OkStatus();
}

StatusOr<DType> ParseKvDType(const std::string& name) {
  DType type;
  if (!ParseDType(name, &type) || !IsKvDType(type)) {
    return InvalidArgument("--kv-dtype must be f32, f16, bf16 or q8_0, not '" + name + "'");
  }
  return type;
}

int64_t KvPool::RowBytes(int64_t head_dim, DType dtype) { return DTypeRowBytes(dtype, head_dim); }

int64_t KvPool::BlockBytes(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                           DType dtype) {
  return num_layers * 2 * block_size * num_kv_heads * RowBytes(head_dim, dtype);
}

int64_t KvPool::BlocksForBudget(int64_t bytes, int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                                int64_t block_size, DType dtype) {
  if (!CheckType(head_dim, dtype).ok()) return 0;
  const int64_t per_block = BlockBytes(num_layers, num_kv_heads, head_dim, block_size, dtype);
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
  RETURN_IF_ERROR(CheckType(shape.head_dim, shape.dtype));
  const int64_t per_block = BlockBytes(shape.num_layers, shape.num_kv_heads, shape.head_dim, shape.block_size,
                                       shape.dtype);
  if (shape.num_blocks > std::numeric_limits<int64_t>::max() / 2 / per_block) {
    return ResourceExhausted("KV pool of " + std::to_string(shape.num_blocks) + " blocks overflows the address space");
  }
  const int64_t total_bytes = per_block * shape.num_blocks;
  const size_t bytes = static_cast<size_t>(total_bytes);
  // Anonymous memory: page-aligned and zero-filled by the kernel on first touch.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhausted("cannot map a KV pool of " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  return std::unique_ptr<KvPool>(
      new KvPool(shape, std::unique_ptr<uint8_t, Unmapper>(static_cast<uint8_t*>(p), Unmapper{bytes}), total_bytes));
}

KvPool::KvPool(const KvPoolShape& shape, std::unique_ptr<uint8_t, Unmapper> data, int64_t total_bytes)
    : shape_(shape), data_(std::move(data)), total_bytes_(total_bytes) {}

int64_t KvPool::BlockStride() const {
  return shape_.block_size * shape_.num_kv_heads * RowBytes(shape_.head_dim, shape_.dtype);
}

int64_t KvPool::LayerBytes() const { return shape_.num_blocks * BlockStride(); }

void* KvPool::KeyCache(int64_t layer) {
  CHECK(layer >= 0 && layer < shape_.num_layers) << "layer " << layer;
  return data_.get() + (2 * layer) * LayerBytes();
}
void* KvPool::ValueCache(int64_t layer) {
  CHECK(layer >= 0 && layer < shape_.num_layers) << "layer " << layer;
  return data_.get() + (2 * layer + 1) * LayerBytes();
}
const void* KvPool::KeyCache(int64_t layer) const { return const_cast<KvPool*>(this)->KeyCache(layer); }
const void* KvPool::ValueCache(int64_t layer) const { return const_cast<KvPool*>(this)->ValueCache(layer); }

Status KvPool::CopyBlock(int64_t src, int64_t dst) {
  if (src < 0 || src >= shape_.num_blocks || dst < 0 || dst >= shape_.num_blocks) {
    return InvalidArgument("block copy " + std::to_string(src) + " -> " + std::to_string(dst) +
                           " outside the pool of " + std::to_string(shape_.num_blocks) + " blocks");
  }
  if (src == dst) return OkStatus();
  const int64_t stride = BlockStride();
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer) {
    for (void* cache : {KeyCache(layer), ValueCache(layer)}) {
      auto* base = static_cast<uint8_t*>(cache);
      std::memcpy(base + dst * stride, base + src * stride, stride);
    }
  }
  return OkStatus();
}

}  // namespace tpserve
