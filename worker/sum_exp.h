// SumExp: the partial sums of a distributed log-sum-exp, fast. The sampler needs one per row over
// the whole vocabulary slice (for the logprobs); with 49152 tokens a scalar libm exp per token
// costs more than the rest of sampling, so this uses a polynomial exp the compiler vectorises
// (relative error < 3e-7 per term; blocks of 64 summed in float, then in double): ample for
// float logprobs.
#pragma once

#include <cstdint>

namespace tpserve {

// Sum over i of exp(x[i] - m), in double; terms below exp(-87) (and -inf) count as 0.
// x: [n]. REQUIRES: x[i] <= m for every i, m finite.
double SumExp(const float* x, int64_t n, float m);

}  // namespace tpserve
