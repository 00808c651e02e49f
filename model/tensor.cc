#include "model/tensor.h"

#include "common/check.h"

namespace tpserve {

HostTensor HostTensor::Allocate(DType type, int64_t rows, int64_t cols) {
  HostTensor t;
  t.type = type;
  t.rows = rows;
  t.cols = cols;
  const size_t bytes = (static_cast<size_t>(t.nbytes()) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
  t.data = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  return t;
}

std::vector<float> HostTensor::ToF32() const {
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(type, row(r), out.data() + r * cols, cols);
  return out;
}

}  // namespace tpserve
