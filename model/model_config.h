// The shape and hyper-parameters of a Llama-family decoder, read from a model file's metadata.
#pragma once

#include <string>
#include <vector>

#include "common/rope_layout.h"
#include "common/status.h"

namespace tpserve {

class GgufFile;

// Llama-3 style frequency-dependent RoPE scaling ("rope_type": "llama3").
struct RopeScaling {
  bool enabled = false;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context_length = 8192;
};

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_size = 0;
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // key/value heads (GQA when fewer than num_heads)
  int head_dim = 0;
  int vocab_size = 0;
  int context_length = 0;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // [D/2] divisors of the inverse frequencies stored in the file itself (GGUF rope_freqs.weight,
  // written by llama.cpp for Llama 3.1+); empty if none. Applied instead of rope_scaling when present.
  std::vector<float> rope_freq_factors;
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the LM head is token_embd.weight
  int bos_id = -1;
  int eos_id = -1;
  int eot_id = -1;  // end-of-turn token of the chat format (-1: same as eos)
  bool add_bos = false;
  std::string chat_template;

  // INVALID_ARGUMENT naming the first inconsistent field (e.g. heads not dividing hidden size
  // when head_dim is implied, kv heads not dividing heads).
  Status Validate() const;
  // The RoPE inverse frequencies [head_dim / 2], scaling applied.
  std::vector<float> RopeInverseFrequencies() const;
};

// The config of a GGUF file of architecture "llama" from its `llama.*` and `tokenizer.*` metadata.
// head_dim is llama.attention.key_length, else hidden / heads; vocab_size is llama.vocab_size, else
// the rows of token_embd.weight, else the token list length; tied_embeddings when output.weight is
// absent. UNIMPLEMENTED for other architectures or RoPE scaling types other than none/llama3;
// DATA_LOSS naming the file for a missing or mistyped required key; the result is Validate()d.
StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace tpserve
