// BpeTokenizer: byte-level BPE (GPT-2 family; SmolLM2, Llama 3). Text is pre-tokenized into words
// (model/pretokenizer.h); each word's bytes are mapped to printable code points (GPT-2's
// bytes_to_unicode, so a space is "Ġ"), and adjacent symbols are merged lowest merge rank first,
// leftmost first among equal ranks, until no listed merge applies.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>

#include "model/pretokenizer.h"
#include "model/tokenizer.h"

namespace tpserve {

class BpeTokenizer : public Tokenizer {
 public:
  // INVALID_ARGUMENT for a malformed merge ("a b" with both sides in the vocabulary) and
  // UNIMPLEMENTED for an unknown pre-tokenizer name. REQUIRES: vocab validated by FromVocab.
  static StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerVocab vocab);

  PreTokenizerKind pre_tokenizer() const { return pre_; }

 protected:
  void EncodeText(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;
  std::string NormalTokenText(int32_t id) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  BpeTokenizer(TokenizerVocab vocab, PreTokenizerKind pre);
  Status BuildMerges();
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  PreTokenizerKind pre_;
  std::unordered_map<uint64_t, Merge> merges_;   // (left id, right id) -> rank and result
  std::array<int32_t, 256> byte_token_{};        // id of the one-symbol token of each byte, or -1
  std::array<std::string, 256> byte_to_symbol_;  // UTF-8 of GPT-2's code point for each byte
  std::unordered_map<char32_t, uint8_t> symbol_to_byte_;
};

// GPT-2's reversible byte <-> printable code point mapping (bytes_to_unicode in the GPT-2 source):
// printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in byte order.
char32_t ByteToUnicode(uint8_t byte);

}  // namespace tpserve
