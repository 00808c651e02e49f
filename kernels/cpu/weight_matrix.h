// A read-only view of a weight matrix in its stored type, as the matmul kernels consume it.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace tpserve {

// [rows = out_features, cols = in_features], row-major; row r starts at
// data + r * DTypeRowBytes(type, cols). For quantised types cols is a multiple of the type's block
// (DTypeBlockElems: 32, or 256 for K-quants).
struct WeightMatrix {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
};

}  // namespace tpserve
