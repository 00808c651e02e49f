// Tokenizer: text <-> token ids for the model's vocabulary. Built from a GGUF file (tokenizer.ggml.*),
// a Hugging Face directory (tokenizer.json + tokenizer_config.json) or a TokenizerVocab.
//
// Two models sit behind this interface: byte-level BPE (model/bpe_tokenizer.h; SmolLM2, Llama 3,
// GPT-2) and SentencePiece-style (model/spm_tokenizer.h; Llama 2, TinyLlama, synthetic models).
// Thread-safe: every method is const and keeps no mutable state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/tokenizer_vocab.h"

namespace tpserve {

class GgufFile;

class Tokenizer {
 public:
  // Errors: NOT_FOUND when the file has no tokenizer.ggml.model/tokens; UNIMPLEMENTED for a model
  // or pre-tokenizer this project does not know; DATA_LOSS for inconsistent arrays or ids out of
  // range.
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  // `dir`/tokenizer.json, a BPE model either byte-level (ByteLevel pre-tokenizer: GPT-2,
  // SmolLM2/StarCoder digits, Llama 3 split) or SentencePiece style (▁ normalizer or Metaspace,
  // byte fallback: Llama 2, TinyLlama, Mistral; run as SPM with merge ranks as scores), plus
  // bos/eos/add_bos_token/chat_template from `dir`/tokenizer_config.json when present.
  // NOT_FOUND, DATA_LOSS (malformed file) or UNIMPLEMENTED as above.
  static StatusOr<std::unique_ptr<Tokenizer>> FromHfDir(const std::string& dir);
  // INVALID_ARGUMENT when the vocabulary is inconsistent (sizes, ids, merges of unknown pieces).
  static StatusOr<std::unique_ptr<Tokenizer>> FromVocab(TokenizerVocab vocab);

  virtual ~Tokenizer() = default;

  // Token ids of `text` (any bytes; invalid UTF-8 is encoded byte-wise). BOS first when add_bos
  // and the vocabulary has one. When parse_special, control tokens written in the text (e.g.
  // "<|im_start|>") become their single ids; user-defined tokens always do.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special = true) const;

  // The text of a whole sequence: the tokens' bytes (control tokens as their written form, e.g.
  // "<|im_end|>") concatenated, with invalid UTF-8 replaced by U+FFFD (maximal subparts) and, for
  // SPM vocabularies with add_space_prefix, the first token's leading space removed. Ids out of
  // range are skipped. StreamDecoder produces exactly this text incrementally.
  std::string Decode(const std::vector<int32_t>& ids) const;

  // The bytes token `id` contributes to decoded text, before UTF-8 sanitising and leading-space
  // removal: may be part of a character (e.g. "\xE4" for a byte token). "" when out of range.
  std::string TokenText(int32_t id) const;
  // The token's piece as stored in the vocabulary ("Ġhello", "▁hello", "<0x0A>", "<|im_start|>").
  // REQUIRES: 0 <= id < vocab_size().
  const std::string& TokenPiece(int32_t id) const;
  // The id of a vocabulary piece (stored form, as TokenPiece returns it).
  std::optional<int32_t> TokenId(std::string_view piece) const;

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.pieces.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  // End of an assistant turn in the chat format (e.g. <|im_end|>, <|eot_id|>); eos when none.
  int32_t eot_id() const { return vocab_.eot_id; }
  // Whether the model expects BOS at the start of a prompt (GGUF add_bos_token).
  bool add_bos() const { return vocab_.add_bos; }
  // True for control tokens (GGUF type 3, HF special added tokens) and unknown/unused ids: tokens
  // a user never sees as plain text.
  bool IsSpecial(int32_t id) const;
  TokenType token_type(int32_t id) const;
  TokenizerModel model() const { return vocab_.model; }
  // SPM with add_space_prefix: Decode drops the first token's leading space.
  bool strips_leading_space() const { return vocab_.model == TokenizerModel::kSpm && vocab_.add_space_prefix; }
  const std::string& chat_template() const { return vocab_.chat_template; }
  const TokenizerVocab& vocab() const { return vocab_; }

 protected:
  // REQUIRES: vocab already validated (pieces non-empty, types/scores sized [V], ids in range).
  explicit Tokenizer(TokenizerVocab vocab);

  // Appends the ids of `text`, which holds no special tokens. `after_special` is true at the start
  // of the text and right after a special token (SPM puts its space prefix there).
  virtual void EncodeText(std::string_view text, bool after_special, std::vector<int32_t>* out) const = 0;
  // The decoded bytes of a token that is not control/unknown/unused/user-defined.
  virtual std::string NormalTokenText(int32_t id) const = 0;

  // Hashes std::string and std::string_view alike, so lookups by view allocate nothing.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  TokenizerVocab vocab_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> piece_to_id_;

 private:
  // Fills token_text_ from TokenText's rules (called once the derived object exists).
  void CacheTokenTexts();

  // Position and id of the longest special token starting at text[pos], if any.
  std::optional<int32_t> MatchSpecial(std::string_view text, size_t pos, bool parse_special) const;

  // Special (control and user-defined) token ids by first byte, longest piece first.
  std::array<std::vector<int32_t>, 256> specials_by_first_byte_;
  std::vector<std::string> token_text_;  // [V] decoded bytes of each token
  std::vector<bool> rstrip_;             // [V] when vocab_.rstrip_specials: whitespace after it is dropped
};

}  // namespace tpserve
