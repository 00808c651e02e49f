#include "worker/merged_column_parallel_linear.h"

#include "common/check.h"
#include "kernels/cpu/matmul.h"

namespace tpserve {

StatusOr<MergedColumnParallelLinear> MergedColumnParallelLinear::Load(const WeightSource& weights,
                                                                      const std::vector<Part>& parts,
                                                                      int64_t in_features, bool merge) {
  CHECK(!parts.empty());
  MergedColumnParallelLinear layer;
  layer.in_features_ = in_features;
  for (const Part& part : parts) {
    ASSIGN_OR_RETURN(WeightSlice slice, WeightSlice::Load(weights, part.name, part.out_features, in_features,
                                                          part.row_begin, part.row_end, 0, in_features));
    layer.part_rows_.push_back(slice.rows());
    layer.slices_.push_back(std::move(slice));
    std::vector<float> bias;
    if (!part.bias.empty()) {
      ASSIGN_OR_RETURN(bias, LoadVectorSlice(weights, part.bias, part.out_features, part.row_begin, part.row_end));
    }
    layer.biases_.push_back(std::move(bias));
  }
  for (int i = 0; i < static_cast<int>(layer.slices_.size()); ++i) {
    layer.matrices_.push_back(layer.slices_[i].matrix());
    if (merge && !layer.groups_.empty() && layer.slices_[layer.groups_.back().first_part].type() == layer.slices_[i].type()) {
      layer.groups_.back().num_parts += 1;
    } else {
      layer.groups_.push_back({i, 1});
    }
  }
  return layer;
}

int64_t MergedColumnParallelLinear::bytes() const {
  int64_t bytes = 0;
  for (const WeightSlice& slice : slices_) bytes += slice.bytes();
  for (const std::vector<float>& bias : biases_) bytes += static_cast<int64_t>(bias.size() * sizeof(float));
  return bytes;
}

void MergedColumnParallelLinear::Forward(const float* x, int64_t num_tokens, std::span<float* const> outs,
                                         ThreadPool* pool) const {
  CHECK_EQ(static_cast<int>(outs.size()), num_parts());
  if (num_tokens == 0) return;
  for (const Group& group : groups_) {
    MatMulParts(std::span(matrices_).subspan(group.first_part, group.num_parts), x, num_tokens,
                outs.subspan(group.first_part, group.num_parts), pool);
  }
  for (int i = 0; i < num_parts(); ++i) {
    const std::vector<float>& bias = biases_[i];
    if (bias.empty()) continue;
    for (int64_t t = 0; t < num_tokens; ++t) {
      float* row = outs[i] + t * part_rows_[i];
      for (int64_t r = 0; r < part_rows_[i]; ++r) row[r] += bias[r];
    }
  }
}

}  // namespace tpserve
