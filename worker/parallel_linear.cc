#include "worker/parallel_linear.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_fixed_point.h"

namespace tpserve {

StatusOr<std::vector<float>> LoadVectorSlice(const WeightSource& weights, const std::string& name, int64_t size,
                                             int64_t begin, int64_t end) {
  const TensorInfo* info = weights.Find(name);
  if (info == nullptr) return NotFound("model has no tensor " + name);
  if (info->shape.size() != 1 || info->shape[0] != size) {
    return DataLoss("tensor " + name + " is not a vector of " + std::to_string(size));
  }
  if (begin == end) return std::vector<float>();
  ASSIGN_OR_RETURN(HostTensor slice, weights.ReadCols(name, begin, end));
  return slice.ToF32();
}

StatusOr<WeightSlice> WeightSlice::Load(const WeightSource& weights, const std::string& name, int64_t rows,
                                        int64_t cols, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                        int64_t col_end) {
  CHECK(0 <= row_begin && row_begin <= row_end && row_end <= rows) << name;
  CHECK(0 <= col_begin && col_begin <= col_end && col_end <= cols) << name;
  const TensorInfo* info = weights.Find(name);
  if (info == nullptr) return NotFound("model has no tensor " + name);
  if (info->shape.size() != 2 || info->rows() != rows || info->cols() != cols) {
    std::string shape;
    for (size_t i = 0; i < info->shape.size(); ++i) {
      if (i > 0) shape.push_back('x');
      shape.append(std::to_string(info->shape[i]));
    }
    return DataLoss("tensor " + name + " has shape [" + shape + "], expected [" + std::to_string(rows) + "x" +
                    std::to_string(cols) + "]");
  }
  WeightSlice slice;
  slice.matrix_.type = info->type;
  slice.matrix_.rows = row_end - row_begin;
  slice.matrix_.cols = col_end - col_begin;
  if (slice.matrix_.rows == 0 || slice.matrix_.cols == 0) return slice;
  ASSIGN_OR_RETURN(slice.tensor_, weights.ReadSlice(name, row_begin, row_end, col_begin, col_end));
  if (slice.tensor_.rows != slice.matrix_.rows || slice.tensor_.cols != slice.matrix_.cols) {
    return Internal("reader returned a " + std::to_string(slice.tensor_.rows) + "x" +
                    std::to_string(slice.tensor_.cols) + " slice of " + name);
  }
  slice.matrix_.type = slice.tensor_.type;
  slice.matrix_.data = slice.tensor_.data.get();
  return slice;
}

StatusOr<RowParallelLinear> RowParallelLinear::Load(const WeightSource& weights, const std::string& name,
                                                    int64_t out_features, int64_t in_features, int64_t col_begin,
                                                    int64_t col_end) {
  RowParallelLinear layer;
  layer.out_features_ = out_features;
  ASSIGN_OR_RETURN(layer.weight_,
                   WeightSlice::Load(weights, name, out_features, in_features, 0, out_features, col_begin, col_end));
  if (layer.in_shard() > 0) layer.range_ = FixedPointRange(layer.weight_.matrix());
  return layer;
}

// The rare step whose activations left the fixed-point range: an f32 matmul and an f32 all-reduce,
// as every rank agreed through the flag. Correct, but no longer bitwise TP-invariant.
Status RowParallelLinear::ForwardInFloat(const float* x, int64_t num_tokens, float* y, ThreadPool* pool,
                                         Communicator& comm) const {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    LOG(WARN) << "row-parallel sums left the exact fixed-point range (|partial| < 2^17); such steps are summed "
                 "in f32, so TP degrees may differ in the last bits (logged once)";
  }
  if (in_shard() == 0) {
    std::fill(y, y + num_tokens * out_features_, 0.0f);
  } else {
    MatMul(weight_.matrix(), x, num_tokens, y, pool);
  }
  return comm.AllReduceSum(y, static_cast<size_t>(num_tokens * out_features_));
}

Status RowParallelLinear::Forward(const float* x, int64_t num_tokens, float* y, ThreadPool* pool,
                                  Communicator& comm) const {
  if (num_tokens == 0) return OkStatus();
  const int64_t n = num_tokens * out_features_;
  // [T * out_features + 1]: this rank's fixed-point partial products, then a count of the ranks whose
  // input left the exact range, summed in the same all-reduce so that every rank sees it. Written where
  // the communicator sums them (a shared-memory slot on one host: no copy).
  int64_t* partial = comm.SumToFloatBuffer(static_cast<size_t>(n));
  const bool admitted = range_.Admits(x, num_tokens, pool);
  if (in_shard() == 0 || !admitted) {
    std::fill(partial, partial + n, 0);  // a rank with no columns contributes zeros
  } else {
    MatMulFixedPoint(weight_.matrix(), x, num_tokens, partial, pool);
  }
  if (comm.size() == 1) {
    // Nothing to sum: FixedPointToFloat is the all-reduce's own conversion (one rounding, the exact 2^-32),
    // here on the pool's threads where a prefill has enough of it (1.3 % of a SmolLM2 pp512 on one).
    if (!admitted) return ForwardInFloat(x, num_tokens, y, pool, comm);
    constexpr int64_t kMinParallelValues = 1 << 14;
    if (n < kMinParallelValues) {
      FixedPointToFloat(partial, n, y);
    } else {
      pool->ParallelFor(num_tokens, [&](int64_t begin, int64_t end) {
        FixedPointToFloat(partial + begin * out_features_, (end - begin) * out_features_, y + begin * out_features_);
      });
    }
    return OkStatus();
  }
  partial[n] = admitted ? 0 : 1;
  int64_t num_outside = 0;
  RETURN_IF_ERROR(comm.AllReduceSumToFloat(partial, static_cast<size_t>(n), 1.0f / kFixedPointScale, y, &num_outside));
  if (num_outside != 0) return ForwardInFloat(x, num_tokens, y, pool, comm);
  return OkStatus();
}

StatusOr<VocabParallelEmbedding> VocabParallelEmbedding::Load(const WeightSource& weights, const std::string& name,
                                                              int64_t vocab_size, int64_t hidden,
                                                              int64_t vocab_begin, int64_t vocab_end) {
  VocabParallelEmbedding layer;
  layer.vocab_begin_ = vocab_begin;
  layer.hidden_ = hidden;
  ASSIGN_OR_RETURN(layer.table_, WeightSlice::Load(weights, name, vocab_size, hidden, vocab_begin, vocab_end, 0, hidden));
  return layer;
}

Status VocabParallelEmbedding::Forward(const int32_t* ids, int64_t num_tokens, float* out, Communicator& comm) const {
  if (num_tokens == 0) return OkStatus();
  if (table_.rows() == 0) {
    std::fill(out, out + num_tokens * hidden_, 0.0f);
  } else {
    EmbeddingLookup(table_.matrix(), vocab_begin_, ids, num_tokens, out);
  }
  return comm.AllReduceSum(out, static_cast<size_t>(num_tokens * hidden_));
}

StatusOr<ParallelLmHead> ParallelLmHead::Load(const WeightSource& weights, const std::string& name,
                                              int64_t vocab_size, int64_t hidden, int64_t vocab_begin,
                                              int64_t vocab_end) {
  ParallelLmHead head;
  head.vocab_begin_ = vocab_begin;
  ASSIGN_OR_RETURN(head.weight_, WeightSlice::Load(weights, name, vocab_size, hidden, vocab_begin, vocab_end, 0, hidden));
  return head;
}

ParallelLmHead ParallelLmHead::Tied(const VocabParallelEmbedding& embedding) {
  ParallelLmHead head;
  head.vocab_begin_ = embedding.vocab_begin();
  head.weight_ = embedding.table();
  return head;
}

void ParallelLmHead::Forward(const float* x, int64_t num_rows, float* logits, ThreadPool* pool) const {
  if (num_rows == 0 || vocab_shard() == 0) return;
  MatMul(weight_.matrix(), x, num_rows, logits, pool);
}

}  // namespace tpserve
