// WeightSource: the tensors of a checkpoint, by canonical (GGUF) name, readable by slice.
// A tensor-parallel rank reads only its rows or columns; nothing else is materialised.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/tensor.h"

namespace tpserve {

// Canonical names (GGUF's): token_embd.weight, output_norm.weight, output.weight (absent when
// the embeddings are tied), blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,
// ffn_up,ffn_down}.weight. Q/K rows follow the checkpoint's own RoPE layout (ModelConfig::rope_layout).
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // nullptr if the tensor is absent.
  virtual const TensorInfo* Find(const std::string& name) const = 0;
  virtual std::vector<std::string> Names() const = 0;

  // Rows [row_begin, row_end) × columns [col_begin, col_end) in the stored type.
  // Errors: NOT_FOUND (no such tensor), INVALID_ARGUMENT (range outside the tensor, or column
  // bounds not multiples of the type's block: 32, or 256 for K-quants), DATA_LOSS (the file changed under us).
  virtual StatusOr<HostTensor> ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                         int64_t col_begin, int64_t col_end) const = 0;

  // The whole tensor.
  StatusOr<HostTensor> Read(const std::string& name) const;
  StatusOr<HostTensor> ReadRows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  StatusOr<HostTensor> ReadCols(const std::string& name, int64_t col_begin, int64_t col_end) const;
};

}  // namespace tpserve
