// CopyTensorSlice: the shared slice copy of the memory-mapped readers (GgufFile, SafetensorsDir).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "model/tensor.h"

namespace tpserve {

// Copies rows [row_begin, row_end) x columns [col_begin, col_end) of the tensor `info` whose bytes
// start at `data` (rows of DTypeRowBytes(info.type, info.cols()) bytes) into a new HostTensor.
// INVALID_ARGUMENT naming the tensor for a range outside it, column bounds that are not multiples of
// the type's block, or a tensor of more than 2 dimensions.
StatusOr<HostTensor> CopyTensorSlice(const TensorInfo& info, const uint8_t* data, int64_t row_begin,
                                     int64_t row_end, int64_t col_begin, int64_t col_end);

}  // namespace tpserve
