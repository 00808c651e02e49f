// MergedColumnParallelLinear: column-parallel weights that read the same input (Q, K, V; gate, up), this
// rank's row slices of each computed by a single MatMulParts — one round of thread-pool dispatches
// instead of one per weight (vLLM's QKVParallelLinear and MergedColumnParallelLinear). The slices stay
// where they were loaded (views of the mapped checkpoint, or their own buffers): nothing is stacked or
// copied. The kernels compute every output row with the same operation sequence whatever rows sit
// beside it (kernels/cpu/matmul.h), so each part's output is bitwise what a separate MatMul on its own
// slice gives.
//
// A part may sit inside a bigger tensor (Phi-3's attn_qkv holds Q, K and V): its rows are then the
// tensor's rows [row_begin, row_end) with out_features the tensor's row count, so a rank takes its own
// heads of each part, never a contiguous slice of the fused tensor. A part may carry a bias (Qwen 2's
// Q/K/V), added to its output rows after the matmul.
//
// Only weights of one stored type can share a matmul: consecutive parts of the same type form a group, and
// a change of type starts a new one (a model with Q4_1 Q/K and a Q8_0 V runs two matmuls).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"
#include "model/weight_source.h"
#include "worker/parallel_linear.h"

namespace tpserve {

class MergedColumnParallelLinear {
 public:
  // One weight: W: [out_features, in_features]; this rank keeps rows [row_begin, row_end).
  struct Part {
    std::string name;
    int64_t out_features = 0;
    int64_t row_begin = 0;
    int64_t row_end = 0;
    std::string bias = {};  // a vector [out_features] whose [row_begin, row_end) is added; "" for none
  };

  MergedColumnParallelLinear() = default;
  // Loads each part's slice (WeightSlice::Load) and groups runs of equal type. merge = false gives every
  // part its own matmul: the unmerged layout, for A/B comparisons.
  // Errors: WeightSlice::Load's (NOT_FOUND, DATA_LOSS, the reader's); a missing bias is NOT_FOUND, one
  // that is not a vector of out_features is DATA_LOSS.
  static StatusOr<MergedColumnParallelLinear> Load(const WeightSource& weights, const std::vector<Part>& parts,
                                                   int64_t in_features, bool merge = true);

  // x: [T, in_features]; outs[i]: [T, out_shard(i)] for every part i (REQUIRES: outs.size() == num_parts()).
  void Forward(const float* x, int64_t num_tokens, std::span<float* const> outs, ThreadPool* pool) const;

  int64_t in_features() const { return in_features_; }
  int num_parts() const { return static_cast<int>(part_rows_.size()); }
  int64_t out_shard(int part) const { return part_rows_[part]; }
  int num_matrices() const { return static_cast<int>(groups_.size()); }  // matmuls per Forward
  int64_t bytes() const;

 private:
  // Parts [first_part, first_part + num_parts), of one type: one MatMulParts.
  struct Group {
    int first_part = 0;
    int num_parts = 0;
  };

  std::vector<Group> groups_;
  std::vector<WeightSlice> slices_;         // [num_parts]
  std::vector<WeightMatrix> matrices_;      // [num_parts] slices_[i].matrix()
  std::vector<int64_t> part_rows_;          // [num_parts]
  std::vector<std::vector<float>> biases_;  // [num_parts][out_shard(i)], empty for a part without bias
  int64_t in_features_ = 0;
};

}  // namespace tpserve
