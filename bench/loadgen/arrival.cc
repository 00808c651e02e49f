#include "bench/loadgen/arrival.h"

#include <cmath>
#include <random>

#include "common/check.h"

namespace tpserve::loadgen {

std::vector<double> ArrivalTimes(int32_t num_requests, double request_rate, double burstiness, uint64_t seed) {
  CHECK(request_rate > 0 && burstiness > 0);
  std::vector<double> times(num_requests, 0.0);  // [num_requests]
  if (std::isinf(request_rate)) return times;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (request_rate * burstiness));
  double t = 0;
  for (double& at : times) {
    t += gap(rng);
    at = t;
  }
  return times;
}

}  // namespace tpserve::loadgen
