// MemoryWeightSource: a WeightSource over tensors held in memory, for tests that need a model without
// a file; and RandomLlama, seeded random Llama weights of any shape and element type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace tpserve::testing {

class MemoryWeightSource : public WeightSource {
 public:
  // Stores `values` ([rows, cols] row-major f32; rows = 1 and shape {cols} for a vector) in `type`.
  void Add(const std::string& name, DType type, std::vector<int64_t> shape, const std::vector<float>& values);

  const TensorInfo* Find(const std::string& name) const override;
  std::vector<std::string> Names() const override;
  StatusOr<HostTensor> ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                 int64_t col_end) const override;

  // Total bytes of all tensors as stored.
  int64_t total_bytes() const;
  // The same tensors, each dequantised to F32 (the "F32 model made from its dequantised weights").
  MemoryWeightSource Dequantized() const;
  // Bytes handed out by ReadSlice so far (to check a rank reads only its slices).
  int64_t bytes_read() const { return bytes_read_; }

 private:
  struct Entry {
    TensorInfo info;
    HostTensor data;
  };
  std::map<std::string, Entry> tensors_;
  mutable int64_t bytes_read_ = 0;
};

struct RandomLlamaShape {
  int num_layers = 2;
  int hidden_size = 64;
  int num_heads = 4;
  int num_kv_heads = 4;
  int head_dim = 16;
  int ffn_size = 96;
  int vocab_size = 101;
  bool tied_embeddings = false;
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  DType type = DType::kF32;  // of the matrices; norms stay F32; token_embd too unless embd_type is set
  DType embd_type = DType::kF32;
  uint64_t seed = 1;
};

struct RandomLlama {
  ModelConfig config;
  MemoryWeightSource weights;
};

// Weights ~ U(-1, 1) / sqrt(fan_in) so activations stay of order one; norms ~ 1 ± 0.2.
RandomLlama MakeRandomLlama(const RandomLlamaShape& shape);

}  // namespace tpserve::testing
