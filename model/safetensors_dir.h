// SafetensorsDir: a Hugging Face Llama, Mistral, Qwen 2 or Qwen 3 checkpoint directory (config.json plus
// model.safetensors,
// or shards listed in model.safetensors.index.json) as a WeightSource with canonical GGUF tensor
// names. Shards are TensorFiles: tensor data stays in the files until a slice is asked for, then is
// a view of the shard's mapping (when the tensor's data is 32-byte aligned in the file) or read into 2 MiB
// pages (WeightLoading, tensor_file.h). A shard truncated while open
// makes a later slice a DATA_LOSS (tensor_file.h).
//
// HF names map as model.embed_tokens -> token_embd, model.layers.N.input_layernorm -> blk.N.attn_norm,
// self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output}, post_attention_layernorm -> ffn_norm,
// mlp.{gate,up,down}_proj -> ffn_{gate,up,down}, model.norm -> output_norm, lm_head -> output; Qwen 2's
// self_attn.{q,k,v}_proj.bias -> attn_{q,k,v}.bias, Qwen 3's self_attn.{q,k}_norm -> attn_{q,k}_norm.
// Tensors with other names (e.g. rotary inv_freq buffers) or non-float dtypes are ignored. Q/K rows
// stay in HF's half-rotation order: config().rope_layout is RopeLayout::kHalf.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "model/model_config.h"
#include "model/tensor_file.h"
#include "model/weight_source.h"

namespace tpserve {

// The config of an HF LlamaForCausalLM, MistralForCausalLM (its sliding_window too), Qwen2ForCausalLM or
// Qwen3ForCausalLM config.json object (architecture llama, llama, qwen2, qwen3): num_hidden_layers,
// hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, head_dim,
// rope_theta, rope_scaling (null, default or llama3), rms_norm_eps, max_position_embeddings,
// vocab_size, tie_word_embeddings, bos/eos_token_id (the first of a list). `source` names the file
// in errors. DATA_LOSS for missing or mistyped fields, UNIMPLEMENTED for unsupported features
// (other architectures, Llama biases, Qwen's use_sliding_window, other RoPE scaling types); the result
// is Validate()d.
StatusOr<ModelConfig> ModelConfigFromHfConfig(const JsonValue& config, const std::string& source);

// DIR/config.json, plus chat_template and add_bos_token from DIR/tokenizer_config.json if present.
// NOT_FOUND if there is no config.json.
StatusOr<ModelConfig> ModelConfigFromHfDir(const std::string& dir);

// The canonical (GGUF) name of an HF tensor name; empty if it is not a weight tpserve reads (Llama's,
// Qwen 2's biases, Qwen 3's Q/K norms).
std::string HfToGgufName(const std::string& hf_name);
// The inverse: the HF name of a GGUF tensor name; empty if HfToGgufName maps nothing to it.
std::string GgufToHfName(const std::string& gguf_name);

class SafetensorsDir : public WeightSource {
 public:
  // Errors: NOT_FOUND (no config.json or no weights file), DATA_LOSS naming the file and the
  // problem (bad header length, unparsable or malformed header, tensor outside the file, sizes
  // not matching shapes, overlapping tensors, index naming a missing tensor or a path outside
  // the directory), UNIMPLEMENTED (see ModelConfigFromHfConfig). tied_embeddings is set when
  // the config says so or lm_head is absent; output.weight is then not exposed.
  static StatusOr<std::unique_ptr<SafetensorsDir>> Open(const std::string& dir,
                                                        WeightLoading loading = WeightLoading::kAuto);
  ~SafetensorsDir() override;

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }

  // WeightSource
  const TensorInfo* Find(const std::string& name) const override;
  std::vector<std::string> Names() const override;
  StatusOr<HostTensor> ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                 int64_t col_begin, int64_t col_end) const override;

 private:
  SafetensorsDir() = default;
  Status AddShard(const std::string& file_name, const std::vector<std::string>* expected);

  std::string dir_;
  WeightLoading loading_ = WeightLoading::kAuto;
  ModelConfig config_;
  std::vector<std::unique_ptr<TensorFile>> shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<size_t> tensor_shard_;  // [tensors_.size()] index into shards_
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace tpserve
