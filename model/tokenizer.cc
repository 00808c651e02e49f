#include "model/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "model/bpe_tokenizer.h"
#include "model/spm_tokenizer.h"
#include "model/unicode.h"

namespace tpserve {
namespace {

// Ids of chat-format end-of-turn tokens, in the order they are tried when the source names none.
constexpr const char* kEndOfTurnPieces[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"};

Status CheckId(const TokenizerVocab& v, int32_t id, const char* what) {
  if (id < -1 || id >= static_cast<int32_t>(v.pieces.size())) {
    return InvalidArgument(std::string("tokenizer: ") + what + " id " + std::to_string(id) + " outside the vocabulary of " +
                           std::to_string(v.pieces.size()));
  }
  return OkStatus();
}

Status ValidateVocab(TokenizerVocab* v) {
  const size_t n = v->pieces.size();
  if (n == 0) return InvalidArgument("tokenizer: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX)) return InvalidArgument("tokenizer: vocabulary too large");
  if (v->types.empty()) v->types.assign(n, TokenType::kNormal);
  if (v->types.size() != n) {
    return InvalidArgument("tokenizer: " + std::to_string(v->types.size()) + " token types for " + std::to_string(n) +
                           " tokens");
  }
  if (v->scores.empty()) v->scores.assign(n, 0.0f);
  if (v->scores.size() != n) {
    return InvalidArgument("tokenizer: " + std::to_string(v->scores.size()) + " scores for " + std::to_string(n) +
                           " tokens");
  }
  for (auto& t : v->types) {
    const auto raw = static_cast<int32_t>(t);
    if (raw < 0 || raw > 6) t = TokenType::kNormal;  // unknown kinds behave like plain tokens
  }
  RETURN_IF_ERROR(CheckId(*v, v->bos_id, "BOS"));
  RETURN_IF_ERROR(CheckId(*v, v->eos_id, "EOS"));
  RETURN_IF_ERROR(CheckId(*v, v->eot_id, "EOT"));
  RETURN_IF_ERROR(CheckId(*v, v->unk_id, "UNK"));
  RETURN_IF_ERROR(CheckId(*v, v->pad_id, "PAD"));
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(TokenizerVocab vocab) {
  RETURN_IF_ERROR(ValidateVocab(&vocab));
  if (vocab.eot_id < 0) {
    for (const char* piece : kEndOfTurnPieces) {
      auto it = std::find(vocab.pieces.begin(), vocab.pieces.end(), piece);
      if (it != vocab.pieces.end() && vocab.types[it - vocab.pieces.begin()] == TokenType::kControl) {
        vocab.eot_id = static_cast<int32_t>(it - vocab.pieces.begin());
        break;
      }
    }
    if (vocab.eot_id < 0) vocab.eot_id = vocab.eos_id;
  }
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Internal("tokenizer: unknown model");
  switch (vocab.model) {
    case TokenizerModel::kBpe: tokenizer = BpeTokenizer::Create(std::move(vocab)); break;
    case TokenizerModel::kSpm: tokenizer = SpmTokenizer::Create(std::move(vocab)); break;
  }
  if (tokenizer.ok()) (*tokenizer)->CacheTokenTexts();
  return tokenizer;
}

void Tokenizer::CacheTokenTexts() {
  const int32_t n = vocab_size();
  token_text_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    switch (vocab_.types[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUnused:
      case TokenType::kUserDefined:
        token_text_[id] = vocab_.pieces[id];
        break;
      default:
        token_text_[id] = NormalTokenText(id);
    }
  }
}

Tokenizer::Tokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {
  const int32_t n = vocab_size();
  piece_to_id_.reserve(n);
  for (int32_t id = 0; id < n; ++id) {
    piece_to_id_.emplace(vocab_.pieces[id], id);  // the first id wins for a repeated piece
    const TokenType t = vocab_.types[id];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !vocab_.pieces[id].empty()) {
      specials_by_first_byte_[static_cast<uint8_t>(vocab_.pieces[id][0])].push_back(id);
    }
  }
  if (vocab_.rstrip_specials) {
    rstrip_.assign(n, true);
    for (const char* piece : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (auto it = piece_to_id_.find(piece); it != piece_to_id_.end()) rstrip_[it->second] = false;
    }
  }
  for (auto& ids : specials_by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return vocab_.pieces[a].size() > vocab_.pieces[b].size();
    });
  }
}

std::optional<int32_t> Tokenizer::MatchSpecial(std::string_view text, size_t pos, bool parse_special) const {
  for (int32_t id : specials_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    if (!parse_special && vocab_.types[id] == TokenType::kControl) continue;
    const std::string& piece = vocab_.pieces[id];
    if (text.compare(pos, piece.size(), piece) == 0) return id;
  }
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  bool after_special = true;
  size_t begin = 0;  // start of the plain text not yet encoded
  for (size_t pos = 0; pos < text.size();) {
    const std::optional<int32_t> special = MatchSpecial(text, pos, parse_special);
    if (!special) {
      ++pos;
      continue;
    }
    if (pos > begin) EncodeText(text.substr(begin, pos - begin), after_special, &ids);
    ids.push_back(*special);
    after_special = true;
    pos += vocab_.pieces[*special].size();
    if (!rstrip_.empty() && rstrip_[*special]) {
      while (pos < text.size() && std::strchr(" \t\n\v\f\r", text[pos]) != nullptr) ++pos;
    }
    begin = pos;
  }
  if (begin < text.size()) EncodeText(text.substr(begin), after_special, &ids);
  return ids;
}

std::string Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return token_text_[id];
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) continue;
    std::string_view piece = token_text_[ids[i]];
    if (i == 0 && strips_leading_space() && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    bytes += piece;
  }
  return unicode::SanitizeUtf8(bytes);
}

const std::string& Tokenizer::TokenPiece(int32_t id) const {
  CHECK(id >= 0 && id < vocab_size()) << "token id " << id;
  return vocab_.pieces[id];
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view piece) const {
  auto it = piece_to_id_.find(piece);
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

TokenType Tokenizer::token_type(int32_t id) const {
  CHECK(id >= 0 && id < vocab_size()) << "token id " << id;
  return vocab_.types[id];
}

bool Tokenizer::IsSpecial(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  const TokenType t = vocab_.types[id];
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
}

}  // namespace tpserve
