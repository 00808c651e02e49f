// The shape and hyper-parameters of a Llama-family decoder, read from a model file's metadata.
#pragma once

#include <string>
#include <vector>

#include "common/rope_layout.h"
#include "common/status.h"

namespace tpserve {

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

}  // namespace tpserve
