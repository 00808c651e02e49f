#include "model/weight_source.h"

namespace tpserve {

StatusOr<HostTensor> WeightSource::Read(const std::string& name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFound("no tensor " + name);
  return ReadSlice(name, 0, info->rows(), 0, info->cols());
}

StatusOr<HostTensor> WeightSource::ReadRows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFound("no tensor " + name);
  return ReadSlice(name, row_begin, row_end, 0, info->cols());
}

StatusOr<HostTensor> WeightSource::ReadCols(const std::string& name, int64_t col_begin, int64_t col_end) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFound("no tensor " + name);
  return ReadSlice(name, 0, info->rows(), col_begin, col_end);
}

}  // namespace tpserve
