#include "kernels/cpu/softmax.h"

#include <cmath>

#include "kernels/cpu/portable_math.h"

namespace tpserve {

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  // As std::fmax would (NaN never wins), without its library call per element.
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = PortableExpF(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace tpserve
