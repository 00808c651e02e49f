#pragma once

#include <cstdint>

namespace tpserve {

// In-place numerically stable softmax of x[n].
void Softmax(float* x, int64_t n);

}  // namespace tpserve
