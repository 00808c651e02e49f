#include "model/mapped_slice.h"

#include <cstring>
#include <string>

namespace tpserve {

StatusOr<HostTensor> CopyTensorSlice(const TensorInfo& info, const uint8_t* data, int64_t row_begin,
                                     int64_t row_end, int64_t col_begin, int64_t col_end) {
  if (info.shape.size() > 2) return InvalidArgument(info.name + " has more than 2 dimensions");
  const int64_t rows = info.rows();
  const int64_t cols = info.cols();
  if (row_begin < 0 || row_begin > row_end || row_end > rows || col_begin < 0 || col_begin > col_end ||
      col_end > cols) {
    return InvalidArgument(info.name + ": slice rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                           ") cols [" + std::to_string(col_begin) + ", " + std::to_string(col_end) +
                           ") outside the tensor of " + std::to_string(rows) + " x " + std::to_string(cols));
  }
  const int64_t block = DTypeBlockElems(info.type);
  if (col_begin % block != 0 || col_end % block != 0) {
    return InvalidArgument(info.name + ": column bounds must be multiples of " + std::to_string(block) + " for " +
                           DTypeName(info.type));
  }
  HostTensor out = HostTensor::Allocate(info.type, row_end - row_begin, col_end - col_begin);
  const int64_t src_row_bytes = DTypeRowBytes(info.type, cols);
  const uint8_t* src = data + row_begin * src_row_bytes + DTypeRowBytes(info.type, col_begin);
  if (col_begin == 0 && col_end == cols) {
    std::memcpy(out.data.get(), src, static_cast<size_t>(out.nbytes()));
  } else {
    const int64_t dst_row_bytes = out.row_bytes();
    for (int64_t r = 0; r < out.rows; ++r) {
      std::memcpy(out.data.get() + r * dst_row_bytes, src + r * src_row_bytes, static_cast<size_t>(dst_row_bytes));
    }
  }
  return out;
}

}  // namespace tpserve
