// TokenizerVocab: everything a tokenizer is built from, as read from a GGUF file or a Hugging Face
// tokenizer.json (or made by hand in tests and by the synthetic model writer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpserve {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <|im_start|>, <s>: special; parsed from text only when asked to
  kUserDefined = 4,  // added tokens that are always matched in text as a whole
  kUnused = 5,
  kByte = 6,         // <0xNN> byte fallback pieces of SentencePiece vocabularies
};

enum class TokenizerModel {
  kBpe,  // byte-level BPE ranked by merges (GGUF "gpt2", HF BPE with a ByteLevel pre-tokenizer)
  kSpm,  // SentencePiece-style: score-ranked merges of ▁-prefixed pieces, byte fallback ("llama")
};

struct TokenizerVocab {
  TokenizerModel model = TokenizerModel::kBpe;
  std::vector<std::string> pieces;  // [V] token strings as stored (byte-level or ▁ form)
  std::vector<TokenType> types;     // [V]; empty means all kNormal
  std::vector<float> scores;        // [V] SPM merge priorities (higher merges first); may be empty for BPE
  std::vector<std::string> merges;  // BPE: "left right", highest priority first
  std::string pre;                  // BPE pre-tokenizer name (see PreTokenizerFromName)
  bool ignore_merges = false;       // BPE: a word that is itself a token is not split (Llama 3)
  bool add_space_prefix = false;    // SPM: a space is put before the text (and after each special)
  bool add_bos = false;             // the model expects BOS first (advice to callers of Encode)
  // Whitespace right after a matched control or user-defined token is dropped, except after <unk>, <s>
  // and <|endoftext|>: Phi-3's added tokens (rstrip in its tokenizer.json; llama.cpp applies it to GGUF
  // files whose general.name says phi-3).
  bool rstrip_specials = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // -1: found by name ("<|im_end|>", "<|eot_id|>", ...) or else eos
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::string chat_template;  // the model's Jinja chat template, when the source carries one
};

}  // namespace tpserve
