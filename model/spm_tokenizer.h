// SpmTokenizer: SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama"; Llama 2,
// TinyLlama, Mistral, the synthetic models). Spaces become "▁" (U+2581), a space is put before
// the text and after every special token when add_space_prefix, then adjacent pieces are merged
// highest score first (leftmost among equal scores) while the merged piece is in the vocabulary.
// A character that ends up in no piece is written as <0xNN> byte tokens (byte fallback), or as
// the unknown token when the vocabulary has no byte tokens. A piece whose score is -infinity is never
// the result of a merge (how a HF BPE tokenizer.json in SentencePiece style is mapped: each piece
// scores minus the rank of its best merge).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "model/tokenizer.h"

namespace tpserve {

class SpmTokenizer : public Tokenizer {
 public:
  // REQUIRES: vocab validated by Tokenizer::FromVocab.
  static StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerVocab vocab);

 protected:
  void EncodeText(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;
  std::string NormalTokenText(int32_t id) const override;

 private:
  explicit SpmTokenizer(TokenizerVocab vocab);

  // Emits the ids of one merged symbol: its own id, else the two parts it was merged from, else
  // its bytes.
  void Resegment(std::string_view symbol,
                 const std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>& merged_from,
                 std::vector<int32_t>* out) const;

  std::array<int32_t, 256> byte_ids_{};  // id of <0xNN>, or -1
};

}  // namespace tpserve
