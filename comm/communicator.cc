#include "comm/communicator.h"

#include <algorithm>

namespace tpserve {

int64_t* Communicator::SumToFloatBuffer(size_t count) {
  sum_to_float_buffer_.resize(count + 1);
  return sum_to_float_buffer_.data();
}

Status Communicator::AllReduceSumToFloat(const int64_t* partial, size_t count, float scale, float* out,
                                         int64_t* tail) {
  int64_t* sums = Communicator::SumToFloatBuffer(count);  // not an override's buffer
  if (partial != sums) std::copy(partial, partial + count + 1, sums);
  RETURN_IF_ERROR(AllReduceSum(sums, count + 1));
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(sums[i]) * scale;
  *tail = sums[count];
  return OkStatus();
}

}  // namespace tpserve
