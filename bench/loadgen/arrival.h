// Arrival times of an open-loop load: a gamma renewal process at `request_rate` requests/s.
// burstiness 1 is a Poisson process (exponential gaps); below 1 the arrivals come in bursts,
// above 1 they are more even (vLLM's --burstiness: gamma shape = burstiness, mean gap 1/rate).
// An infinite rate sends everything at t = 0.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve::loadgen {

// Seconds from the start at which each of `num_requests` requests is sent; non-decreasing, the
// first gap is drawn too (as in vLLM). REQUIRES: request_rate > 0, burstiness > 0.
std::vector<double> ArrivalTimes(int32_t num_requests, double request_rate, double burstiness, uint64_t seed);

}  // namespace tpserve::loadgen
