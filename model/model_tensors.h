// The tensors a model of a given config holds, by GGUF name and shape, as its Architecture lays them out
// (fused tensors, biases, extra norms). One list for the file checker (model/model_file) and the
// synthetic writer (model/synthetic_model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace tpserve {

struct ModelTensor {
  std::string name;            // "blk.3.attn_q.weight"
  std::vector<int64_t> shape;  // [rows = out features, cols = in features], or [n] for a norm or a bias
  bool is_vector() const { return shape.size() == 1; }
};

// In GGUF file order: token_embd, per layer the attention tensors then the FFN ones, output_norm, output
// (absent when the embeddings are tied). REQUIRES: config.Validate() passed.
std::vector<ModelTensor> ModelTensors(const ModelConfig& config);

}  // namespace tpserve
