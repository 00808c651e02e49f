// Synthetic checkpoints: seeded random weights of any shape and architecture (model/architecture.h),
// written as a GGUF file (every architecture, with its own tensors and metadata keys) or, for llama
// (Mistral when it has a window), qwen2 and qwen3, as a Hugging Face safetensors directory holding the
// same model, streaming
// (one chunk of rows in memory at a time), so multi-GB models can be written on the fly by benchmarks
// and tests.
//
// Weights: every matrix element is uniform with standard deviation 1/sqrt(fan_in) (fan_in = the
// input features, i.e. the columns), so activations keep their scale through many layers; norm
// weights are 1 + uniform(-0.1, 0.1), always F32. Row r of a tensor depends only on (seed, tensor,
// r), so any row can be regenerated independently; biases are uniform with standard deviation
// 1/sqrt(length), F32. The llama GGUF holds Q/K rows in GGUF's interleaved
// RoPE order (as llama.cpp's converter permutes them); the HF directory holds the same rows in HF's
// half-rotation order, and the same values: quantised (or half) GGUF weights are written to the HF
// directory as their dequantised values (F32 for quantised types, the same dtype for F16/BF16).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "model/model_config.h"

namespace tpserve {

struct SyntheticModelOptions {
  ModelConfig config;        // shape; rope_layout is ignored (each format uses its own)
  DType type = DType::kF32;  // every matrix (norms stay F32), as TypeMix chooses (model/type_mix.h): a
                             // K-quant falls back to a 32-value type where rows are not whole super-blocks
  bool medium_mix = false;   // with type Q4_K / Q5_K: llama-quantize's Q4_K_M / Q5_K_M mix
  uint64_t seed = 1;
  uint64_t max_shard_bytes = 0;  // HF directory: split into shards of at most this many bytes (0: one file)
};

// Named shapes: "llama2-7b", "llama3-8b", "smollm2-135m", "llama-1b" (Llama 3.2 1B, with Llama-3
// RoPE scaling), "tiny" (2 layers, hidden 64, 4/2 heads, vocab 300); per architecture the tiny test
// shapes "mistral-tiny", "qwen2-tiny", "qwen3-tiny", "phi3-tiny", "gemma3-tiny" (6 layers, one KV head,
// window 4) and the published shapes "qwen2.5-0.5b", "qwen3-0.6b", "phi3-mini", "gemma3-270m".
// INVALID_ARGUMENT if unknown.
StatusOr<ModelConfig> SyntheticPreset(const std::string& name);
std::string SyntheticPresetNames();  // the names above, comma-separated

// The placeholder SentencePiece-style ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens
// <0x00>..<0xFF>, then unique "▁"-prefixed and plain pieces built from letters, digits and
// punctuation, with descending scores. For architecture "phi3" the last id is the control token
// <|endoftext|> instead of a piece, as Phi-3's added tokens follow its SentencePiece pieces (llama.cpp
// refuses a vocabulary named phi3 without it). REQUIRES: vocab_size >= 300.
struct SyntheticVocab {
  std::vector<std::string> tokens;  // [V]
  std::vector<float> scores;        // [V]
  std::vector<int32_t> types;       // [V] llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte
};
SyntheticVocab MakeSyntheticVocab(int vocab_size, const std::string& architecture = "llama");

// Writes the GGUF file (v3, 32-byte aligned, with the vocabulary above). INVALID_ARGUMENT for an
// invalid config or a column count that is not a multiple of 32 for a quantised type;
// INTERNAL on I/O errors.
Status WriteSyntheticGguf(const SyntheticModelOptions& options, const std::string& path);

// UNIMPLEMENTED for phi3 and gemma3, a Qwen window or linear RoPE scaling.
// Writes DIR/config.json and DIR/model.safetensors (or model-0000K-of-0000N.safetensors shards plus
// model.safetensors.index.json when max_shard_bytes is set), creating DIR if needed, plus a
// Llama-2-style DIR/tokenizer.json (SentencePiece BPE with byte fallback; merge ranks follow the
// GGUF scores, so both tokenize alike) and DIR/tokenizer_config.json.
Status WriteSyntheticHfDir(const SyntheticModelOptions& options, const std::string& dir);

// Exposed for tests. The float weights of row `row` of GGUF tensor `name` before any type
// conversion: out [cols].
void SyntheticRow(const SyntheticModelOptions& options, const std::string& name, int64_t row, float* out,
                  int64_t cols);
// The GGUF row that holds HF row `hf_row` of a Q or K projection (head_dim D): within each head
// HF orders rotary pairs (i, i + D/2) as (first halves, second halves), GGUF as (2i, 2i + 1).
int64_t HfRowToGgufRow(int64_t hf_row, int head_dim);

}  // namespace tpserve
