// Architecture: how one decoder family differs from Llama, as data. The config reader
// (model/model_config) reads its metadata keys by it, the one transformer (worker/llama_model) loads and
// runs its tensors by it, the synthetic writer (model/synthetic_model) writes them by it: an architecture
// is this small description, not a copy of the model.
//
//   llama   Llama 2/3, SmolLM2, Mistral (a sliding window when the file sets one)
//   qwen2   Qwen 2 / 2.5: biases on Q, K and V
//   qwen3   Qwen 3: per-head RMSNorm on Q and K before RoPE, no biases
//   phi3    Phi-3: Q/K/V fused in attn_qkv and gate/up in ffn_up, split into their parts at load
//   gemma3  Gemma 3: embeddings times sqrt(hidden), per-head Q/K norms, norms after attention and FFN too,
//           GELU-tanh gate, sliding-window attention on 5 of every 6 layers with their own RoPE base
//
// Every GGUF architecture but llama keeps Hugging Face's Q/K row order (RoPE pairs (i, i + D/2));
// llama.cpp's converter permutes only llama's rows into interleaved pairs.
#pragma once

#include <string>
#include <string_view>

#include "common/rope_layout.h"

namespace tpserve {

enum class Activation {
  kSilu,      // silu(gate) * up
  kGeluTanh,  // gelu_tanh(gate) * up
};

struct Architecture {
  const char* name = "";  // general.architecture, and the prefix of its metadata keys
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias [rows]
  bool qk_norm = false;          // blk.N.attn_{q,k}_norm.weight [D], RMSNorm of each head before RoPE
  bool fused_qkv = false;        // blk.N.attn_qkv.weight [(H + 2 Hkv) D, hidden] rows Q, K, V
  bool fused_gate_up = false;    // blk.N.ffn_up.weight [2 F, hidden] rows gate, up; no ffn_gate
  bool post_norms = false;       // blk.N.post_attention_norm and post_ffw_norm on each block's output
  bool scale_embedding = false;  // the embedding rows times sqrt(hidden)
  Activation activation = Activation::kSilu;
  // 0: every layer is of one kind (sliding when the file sets a window). n: layer l is a global
  // (full-attention) layer when (l + 1) % n == 0, a sliding-window one otherwise (gemma3: 6).
  int sliding_window_period = 0;
  // RoPE base of the sliding-window layers when the file has no {arch}.rope.freq_base_swa; 0: the
  // global base (gemma3: 10000, as llama.cpp).
  float default_rope_theta_local = 0;
};

// The description of `name`, or nullptr when tpserve does not run it.
const Architecture* FindArchitecture(std::string_view name);
// "llama, qwen2, qwen3, phi3, gemma3": for error messages.
std::string SupportedArchitectures();

}  // namespace tpserve
