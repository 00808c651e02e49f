// The shape and hyper-parameters of a Llama-family decoder, read from a model file's metadata.
#pragma once

#include <string>
#include <vector>

#include "common/rope_layout.h"
#include "common/status.h"
#include "model/architecture.h"

namespace tpserve {

class GgufFile;

// Llama-3 style frequency-dependent RoPE scaling ("rope_type": "llama3"), and "linear" scaling.
struct RopeScaling {
  bool enabled = false;  // llama3
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context_length = 8192;
  // "linear": every frequency divided by this (positions interpolated); 1 when off. On the global
  // layers only in an architecture with local layers (Gemma 3 4B+), as llama.cpp.
  float linear_factor = 1.0f;
};

// A decoder's shape and hyper-parameters; `architecture` names its Architecture (model/architecture.h).
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
  // Keys a sliding-window layer's token at position p attends: p - sliding_window + 1 .. p (llama.cpp's
  // "standard" window, Hugging Face's sliding_window); 0: no sliding window. Which layers slide:
  // IsSlidingLayer.
  int sliding_window = 0;
  float rope_theta_local = 0;  // RoPE base of the local layers (Architecture::sliding_window_period); 0: rope_theta
  float attention_scale = 0;   // softmax scale of q·k; 0: 1 / sqrt(head_dim)
  bool tied_embeddings = false;  // no output.weight: the LM head is token_embd.weight
  int bos_id = -1;
  int eos_id = -1;
  int eot_id = -1;  // end-of-turn token of the chat format (-1: same as eos)
  bool add_bos = false;
  std::string chat_template;

  // INVALID_ARGUMENT naming the first inconsistent field (e.g. an unknown architecture, heads not
  // dividing hidden size when head_dim is implied, kv heads not dividing heads).
  Status Validate() const;
  // REQUIRES: Validate() passed (a known architecture).
  const Architecture& arch() const;
  // Whether `layer` attends through the sliding window (false for every layer when there is none).
  bool IsSlidingLayer(int layer) const;
  // The RoPE inverse frequencies [head_dim / 2] of `layer`, scaling applied: a local layer of an
  // architecture with a sliding_window_period uses rope_theta_local and no scaling.
  std::vector<float> RopeInverseFrequencies(int layer = 0) const;
  float AttentionScale() const;
};

// The config of a GGUF file from its `{arch}.*` and `tokenizer.*` metadata, {arch} being one of
// SupportedArchitectures(). head_dim is {arch}.attention.key_length, else hidden / heads; vocab_size is
// {arch}.vocab_size, else the rows of token_embd.weight, else the token list length; tied_embeddings
// when output.weight is absent; sliding_window from {arch}.attention.sliding_window. UNIMPLEMENTED
// naming it for another architecture (listing the supported ones) or RoPE scaling types other than
// none/linear/llama3; DATA_LOSS naming the file for a missing or mistyped required key; the result is
// Validate()d.
StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace tpserve
