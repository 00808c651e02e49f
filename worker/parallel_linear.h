// The tensor-parallel layers. Each loads only its slice of a weight through WeightSource::ReadSlice, so a
// rank's resident weight bytes are about 1/TP of the model, and each hides its collective: the model body
// composes layers and never calls the communicator itself.
//
//   column-parallel        rows (output features) [row_begin, row_end) of W, no collective: see
//                          worker/merged_column_parallel_linear.h (Q/K/V and gate/up in one matmul).
//   RowParallelLinear      columns (input features) [col_begin, col_end) of W; Forward ends with the
//                          all-reduce that sums the ranks' partial products — the only one in a layer.
//                          The partials are fixed-point int64 (kernels/cpu/matmul_fixed_point.h), so
//                          the sum is exact and every TP degree, 1 included, gives the same bits.
//   VocabParallelEmbedding rows [vocab_begin, vocab_end) of token_embd; lookup + all-reduce.
//   ParallelLmHead         rows [vocab_begin, vocab_end) of output.weight (or of token_embd when tied);
//                          produces this rank's logits shard, no collective (the sampler reduces it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/cpu/fixed_point_range.h"
#include "kernels/cpu/weight_matrix.h"
#include "model/tensor.h"
#include "model/weight_source.h"

namespace tpserve {

// A loaded slice of a weight matrix, kept in its stored type.
class WeightSlice {
 public:
  WeightSlice() = default;
  // Reads rows [row_begin, row_end) × cols [col_begin, col_end) of `name`, which must be a
  // [rows, cols] matrix. An empty range gives an empty slice without touching the file.
  // Errors: NOT_FOUND (missing tensor), DATA_LOSS (wrong shape), or the reader's error.
  static StatusOr<WeightSlice> Load(const WeightSource& weights, const std::string& name, int64_t rows,
                                    int64_t cols, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                    int64_t col_end);

  const WeightMatrix& matrix() const { return matrix_; }
  int64_t rows() const { return matrix_.rows; }
  int64_t cols() const { return matrix_.cols; }
  DType type() const { return matrix_.type; }
  int64_t bytes() const { return tensor_.data ? tensor_.nbytes() : 0; }

 private:
  HostTensor tensor_;
  WeightMatrix matrix_;
};

// Elements [begin, end) of the vector `name` of `size` elements (a norm, or this rank's rows of a bias), as
// f32. Errors: NOT_FOUND (missing tensor), DATA_LOSS (not a vector of `size`), or the reader's error.
StatusOr<std::vector<float>> LoadVectorSlice(const WeightSource& weights, const std::string& name, int64_t size,
                                             int64_t begin, int64_t end);

class RowParallelLinear {
 public:
  RowParallelLinear() = default;
  // W: [out_features, in_features]; this rank keeps columns [col_begin, col_end), block-aligned for
  // quantised types.
  static StatusOr<RowParallelLinear> Load(const WeightSource& weights, const std::string& name,
                                          int64_t out_features, int64_t in_features, int64_t col_begin,
                                          int64_t col_end);
  // x: [T, in_shard()] this rank's input features, y: [T, out_features] the full sum over ranks,
  // bitwise the same for any split of the columns at 32-column boundaries (16 for float weights).
  // When any rank's input could take a sum outside the exact fixed-point range (FixedPointRange:
  // only activations far beyond a plausible model's, or non-finite ones), every rank learns it from
  // the same all-reduce and that step is summed in f32 instead (logged once): still correct, no
  // longer bitwise TP-invariant. Errors: the communicator's (a lost peer, a deadline).
  Status Forward(const float* x, int64_t num_tokens, float* y, ThreadPool* pool, Communicator& comm) const;

  int64_t out_features() const { return out_features_; }
  int64_t in_shard() const { return weight_.cols(); }
  int64_t bytes() const { return weight_.bytes(); }

 private:
  Status ForwardInFloat(const float* x, int64_t num_tokens, float* y, ThreadPool* pool, Communicator& comm) const;

  WeightSlice weight_;
  FixedPointRange range_;
  int64_t out_features_ = 0;
};

class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding() = default;
  // token_embd: [vocab_size, hidden]; this rank keeps rows [vocab_begin, vocab_end).
  static StatusOr<VocabParallelEmbedding> Load(const WeightSource& weights, const std::string& name,
                                               int64_t vocab_size, int64_t hidden, int64_t vocab_begin,
                                               int64_t vocab_end);
  // ids: [T] (REQUIRES: each in [0, vocab_size)), out: [T, hidden]
  Status Forward(const int32_t* ids, int64_t num_tokens, float* out, Communicator& comm) const;

  int64_t hidden() const { return hidden_; }
  int64_t vocab_begin() const { return vocab_begin_; }
  int64_t bytes() const { return table_.bytes(); }
  const WeightSlice& table() const { return table_; }

 private:
  WeightSlice table_;
  int64_t vocab_begin_ = 0;
  int64_t hidden_ = 0;
};

class ParallelLmHead {
 public:
  ParallelLmHead() = default;
  // `name` is output.weight, or token_embd.weight for tied embeddings: [vocab_size, hidden].
  static StatusOr<ParallelLmHead> Load(const WeightSource& weights, const std::string& name, int64_t vocab_size,
                                       int64_t hidden, int64_t vocab_begin, int64_t vocab_end);
  // Tied embeddings: shares the embedding's rows (no second copy in memory).
  static ParallelLmHead Tied(const VocabParallelEmbedding& embedding);
  // x: [S, hidden] (final-normed), logits: [S, V_shard] for vocabulary rows [vocab_begin, vocab_end)
  void Forward(const float* x, int64_t num_rows, float* logits, ThreadPool* pool) const;

  int64_t vocab_begin() const { return vocab_begin_; }
  int64_t vocab_shard() const { return weight_.rows(); }
  int64_t bytes() const { return weight_.bytes(); }

 private:
  WeightSlice weight_;
  int64_t vocab_begin_ = 0;
};

}  // namespace tpserve
