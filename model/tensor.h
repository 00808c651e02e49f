// Tensor metadata as the readers describe it, and an owned host buffer for a (slice of a) tensor.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tpserve {

// Shape is in row-major order, outermost first: a weight matrix is {rows = out_features,
// cols = in_features} (the reverse of ggml's ne[] order). A 1-D tensor has shape {n}.
struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset of the data within its file
  uint64_t nbytes = 0;

  int64_t rows() const { return shape.size() >= 2 ? shape[0] : 1; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

// A 2-D block of a tensor in its stored type. Rows are contiguous with DTypeRowBytes(type, cols) bytes
// each. 1-D tensors are one row. Allocate()d data, and a slice read from a checkpoint (TensorFile's
// HugePageArena), is 64-byte aligned and writable; a view of a mapped
// checkpoint (TensorFile, WeightLoading::kMap) is 32-byte aligned and read-only, and `data` keeps the
// mapping alive.
struct HostTensor {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::shared_ptr<uint8_t> data;  // 64-byte aligned if allocated, 32 if a view of a mapping

  int64_t row_bytes() const { return DTypeRowBytes(type, cols); }
  int64_t nbytes() const { return rows * row_bytes(); }
  const void* row(int64_t r) const { return data.get() + r * row_bytes(); }
  // Allocates an uninitialised aligned buffer of rows × cols elements of `type`.
  static HostTensor Allocate(DType type, int64_t rows, int64_t cols);
  // Dequantised copy of the whole block as f32.
  std::vector<float> ToF32() const;
};

}  // namespace tpserve
