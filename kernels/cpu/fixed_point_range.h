// FixedPointRange: the check, before a fixed-point multiply (kernels/cpu/matmul_fixed_point.h),
// that every term and partial sum it will form stays inside the exact range, ±2^18.
//
// Built once per weight matrix: col_bound[k] ≥ |w[r, k]| for every row r — for quantised weights
// from the block headers alone (|d|·max|scale|·max|q| + |m| + |dmin|·max min, which also covers the
// separate minimum terms of Q4_1, Q5_1 and the K-quants).
// Per call, each token's bound is Σ_k col_bound[k] · (|x[t, k]| + slack), slack being the
// activation rounding of quantised weights (max|x| of the block / 254) and 0 for float weights.
// That bounds |y[t, r]| and every partial of it for every row; a factor 2 of margin covers the f32
// roundings of the terms and of the bound itself. It is cheap (O(T · cols), the weight is not read)
// and loose (a plausible activation is orders of magnitude inside it).
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace tpserve {

class FixedPointRange {
 public:
  FixedPointRange() = default;  // of an empty matrix: admits everything
  explicit FixedPointRange(const WeightMatrix& w);

  // True when MatMulFixedPoint(w, x[T, w.cols], T) is exact. False for non-finite x. With a pool, the
  // tokens are checked on its threads (each token's bound is the same either way).
  bool Admits(const float* x, int64_t num_tokens, ThreadPool* pool = nullptr) const;

 private:
  bool TokenAdmitted(const float* xt) const;  // xt: [cols]

  bool quantized_ = false;
  std::vector<float> col_bound_;    // [cols] max over rows of |w[r, k]| (an upper bound)
  std::vector<float> block_bound_;  // [cols / 32] Σ of col_bound_ over each block (quantised only)
};

}  // namespace tpserve
