#include "model/spm_tokenizer.h"

#include <cmath>
#include <cstdio>
#include <queue>

#include "model/unicode.h"

namespace tpserve {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁"

// "<0xNN>" -> NN, or -1.
int ParseByteToken(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = piece[k];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    value = value * 16 + d;
  }
  return value;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> SpmTokenizer::Create(TokenizerVocab vocab) {
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(vocab)));
}

SpmTokenizer::SpmTokenizer(TokenizerVocab vocab) : Tokenizer(std::move(vocab)) {
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    if (auto id = TokenId(piece)) byte_ids_[b] = *id;
  }
}

void SpmTokenizer::EncodeText(std::string_view raw, bool after_special, std::vector<int32_t>* out) const {
  std::string text;  // the text in piece form: spaces as ▁
  text.reserve(raw.size() + 8);
  if (vocab_.add_space_prefix && after_special) text += kSpaceSymbol;
  for (char c : raw) {
    if (c == ' ') {
      text += kSpaceSymbol;
    } else {
      text.push_back(c);
    }
  }
  // Symbols are characters of `text`, linked in a list; a merged-away symbol has len 0.
  struct Symbol {
    size_t begin, len;
    int32_t prev, next;
  };
  std::vector<Symbol> syms;  // [characters]
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    unicode::DecodeUtf8(text, pos, &len);
    const auto index = static_cast<int32_t>(syms.size());
    syms.push_back({pos, len, index - 1, -1});
    if (index > 0) syms[index - 1].next = index;
    pos += len;
  }
  struct Bigram {
    float score;
    int32_t left, right;
    size_t len;
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Bigram> queue;  // best score first, then leftmost
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view piece(text.data() + syms[left].begin, syms[left].len + syms[right].len);
    auto id = TokenId(piece);
    if (!id || std::isinf(vocab_.scores[*id])) return;  // -inf: a piece never made by merging
    queue.push({vocab_.scores[*id], left, right, piece.size()});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) consider(i - 1, i);

  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> merged_from;
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len || l.next != b.right) continue;  // stale
    const std::string_view left_piece(text.data() + l.begin, l.len), right_piece(text.data() + r.begin, r.len);
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    merged_from.emplace(std::string_view(text.data() + l.begin, l.len), std::make_pair(left_piece, right_piece));
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    Resegment(std::string_view(text.data() + syms[i].begin, syms[i].len), merged_from, out);
  }
}

void SpmTokenizer::Resegment(
    std::string_view symbol,
    const std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>& merged_from,
    std::vector<int32_t>* out) const {
  if (auto id = TokenId(symbol)) {
    out->push_back(*id);
    return;
  }
  auto it = merged_from.find(symbol);
  if (it != merged_from.end()) {
    Resegment(it->second.first, merged_from, out);
    Resegment(it->second.second, merged_from, out);
    return;
  }
  for (char c : symbol) {
    const int32_t byte_id = byte_ids_[static_cast<uint8_t>(c)];
    if (byte_id >= 0) {
      out->push_back(byte_id);
    } else if (vocab_.unk_id >= 0) {
      out->push_back(vocab_.unk_id);
      return;  // one unknown token per unknown character
    }
  }
}

std::string SpmTokenizer::NormalTokenText(int32_t id) const {
  const std::string& piece = vocab_.pieces[id];
  if (vocab_.types[id] == TokenType::kByte) {
    const int byte = ParseByteToken(piece);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
  }
  std::string text;
  text.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    if (piece.compare(pos, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      text.push_back(' ');
      pos += kSpaceSymbol.size();
    } else {
      text.push_back(piece[pos++]);
    }
  }
  return text;
}

}  // namespace tpserve
