#include "worker/merged_column_parallel_linear.h"

#include <cstring>

#include "common/check.h"
#include "kernels/cpu/matmul.h"
#include "worker/parallel_linear.h"

namespace tpserve {

StatusOr<MergedColumnParallelLinear> MergedColumnParallelLinear::Load(const WeightSource& weights,
                                                                      const std::vector<Part>& parts,
                                                                      int64_t in_features, bool merge) {
  CHECK(!parts.empty());
  MergedColumnParallelLinear layer;
  layer.in_features_ = in_features;
  std::vector<WeightSlice> slices;
  for (const Part& part : parts) {
    ASSIGN_OR_RETURN(WeightSlice slice, WeightSlice::Load(weights, part.name, part.out_features, in_features,
                                                          part.row_begin, part.row_end, 0, in_features));
    layer.part_rows_.push_back(slice.rows());
    slices.push_back(std::move(slice));
    std::vector<float> bias;
    if (!part.bias.empty()) {
      ASSIGN_OR_RETURN(bias, LoadVectorSlice(weights, part.bias, part.out_features, part.row_begin, part.row_end));
    }
    layer.biases_.push_back(std::move(bias));
  }
  for (int i = 0; i < static_cast<int>(slices.size()); ++i) {
    if (merge && !layer.stacks_.empty() && layer.stacks_.back().matrix.type == slices[i].type()) {
      layer.stacks_.back().num_parts += 1;
    } else {
      Stack stack;
      stack.matrix.type = slices[i].type();
      stack.matrix.cols = in_features;
      stack.first_part = i;
      stack.num_parts = 1;
      layer.stacks_.push_back(std::move(stack));
    }
    layer.stacks_.back().matrix.rows += slices[i].rows();
  }
  // Copy the slices into their stacks; each slice is freed when `slices` goes, so the resident bytes
  // are the stacks' alone.
  for (Stack& stack : layer.stacks_) {
    if (stack.matrix.rows == 0) continue;
    stack.tensor = HostTensor::Allocate(stack.matrix.type, stack.matrix.rows, in_features);
    uint8_t* dst = stack.tensor.data.get();
    for (int i = stack.first_part; i < stack.first_part + stack.num_parts; ++i) {
      const int64_t nbytes = slices[i].rows() * DTypeRowBytes(stack.matrix.type, in_features);
      if (nbytes > 0) std::memcpy(dst, slices[i].matrix().data, nbytes);
      dst += nbytes;
    }
    stack.matrix.data = stack.tensor.data.get();
  }
  return layer;
}

int64_t MergedColumnParallelLinear::bytes() const {
  int64_t bytes = 0;
  for (const Stack& stack : stacks_) bytes += stack.tensor.data ? stack.tensor.nbytes() : 0;
  for (const std::vector<float>& bias : biases_) bytes += static_cast<int64_t>(bias.size() * sizeof(float));
  return bytes;
}

void MergedColumnParallelLinear::Forward(const float* x, int64_t num_tokens, std::span<float* const> outs,
                                         ThreadPool* pool) const {
  CHECK_EQ(static_cast<int>(outs.size()), num_parts());
  if (num_tokens == 0) return;
  thread_local std::vector<float> stacked;  // [T, rows of the stack], reused across calls
  for (const Stack& stack : stacks_) {
    if (stack.matrix.rows == 0) continue;
    if (stack.num_parts == 1) {
      MatMul(stack.matrix, x, num_tokens, outs[stack.first_part], pool);
      continue;
    }
    const int64_t rows = stack.matrix.rows;
    if (static_cast<int64_t>(stacked.size()) < num_tokens * rows) stacked.resize(num_tokens * rows);
    MatMul(stack.matrix, x, num_tokens, stacked.data(), pool);
    // Split each token's stacked row into the parts' outputs.
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* src = stacked.data() + t * rows;
      for (int i = stack.first_part; i < stack.first_part + stack.num_parts; ++i) {
        if (part_rows_[i] == 0) continue;  // an empty part's output may be a null pointer
        std::memcpy(outs[i] + t * part_rows_[i], src, part_rows_[i] * sizeof(float));
        src += part_rows_[i];
      }
    }
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
