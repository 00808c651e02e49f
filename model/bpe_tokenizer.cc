#include "model/bpe_tokenizer.h"

#include <queue>

#include "model/unicode.h"

namespace tpserve {

char32_t ByteToUnicode(uint8_t byte) {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  if (printable(byte)) return byte;
  int n = 0;  // number of non-printable bytes before this one
  for (int b = 0; b < byte; ++b) n += printable(b) ? 0 : 1;
  return 256 + n;
}

StatusOr<std::unique_ptr<Tokenizer>> BpeTokenizer::Create(TokenizerVocab vocab) {
  const std::optional<PreTokenizerKind> pre = PreTokenizerFromName(vocab.pre);
  if (!pre) return Unimplemented("tokenizer: unknown BPE pre-tokenizer \"" + vocab.pre + "\"");
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer(std::move(vocab), *pre));
  RETURN_IF_ERROR(tok->BuildMerges());
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

BpeTokenizer::BpeTokenizer(TokenizerVocab vocab, PreTokenizerKind pre) : Tokenizer(std::move(vocab)), pre_(pre) {
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = ByteToUnicode(static_cast<uint8_t>(b));
    unicode::AppendUtf8(cp, &byte_to_symbol_[b]);
    symbol_to_byte_[cp] = static_cast<uint8_t>(b);
    const std::optional<int32_t> id = TokenId(byte_to_symbol_[b]);
    byte_token_[b] = id ? *id : -1;
  }
}

Status BpeTokenizer::BuildMerges() {
  merges_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& merge = vocab_.merges[rank];
    const size_t space = merge.find(' ', 1);  // a side is never empty; byte-level pieces hold no ' '
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return InvalidArgument("tokenizer: merge " + std::to_string(rank) + " \"" + merge + "\" is not \"left right\"");
    }
    const std::string left = merge.substr(0, space), right = merge.substr(space + 1);
    const std::optional<int32_t> l = TokenId(left), r = TokenId(right), m = TokenId(left + right);
    if (!l || !r || !m) {
      // HF keeps such merges inert; they can never fire, so skipping them changes nothing.
      continue;
    }
    merges_.emplace(PairKey(*l, *r), Merge{static_cast<int32_t>(rank), *m});  // first (best) rank wins
  }
  return OkStatus();
}

void BpeTokenizer::EncodeText(std::string_view text, bool /*after_special*/, std::vector<int32_t>* out) const {
  for (std::string_view word : PreTokenize(pre_, text)) EncodeWord(word, out);
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (vocab_.ignore_merges) {
    std::string mapped;
    for (char c : word) mapped += byte_to_symbol_[static_cast<uint8_t>(c)];
    if (auto id = TokenId(mapped)) {
      out->push_back(*id);
      return;
    }
  }
  // One symbol per byte, in a doubly linked list; merged-away symbols get id -2.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> syms(n);  // [bytes of the word]
  for (int32_t i = 0; i < n; ++i) syms[i] = {byte_token_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};

  struct Candidate {
    int32_t rank, left, right, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = syms[left].next;
    if (right < 0 || syms[left].id < 0 || syms[right].id < 0) return;
    auto it = merges_.find(PairKey(syms[left].id, syms[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, syms[left].id, syms[right].id, it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[c.left];
    // Stale when either side has merged since the candidate was made.
    if (l.id != c.left_id || l.next != c.right || syms[c.right].id != c.right_id) continue;
    Symbol& r = syms[c.right];
    l.id = c.merged_id;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = -2;
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = syms[i].next) {
    if (syms[i].id >= 0) {
      out->push_back(syms[i].id);
    } else if (vocab_.unk_id >= 0) {
      out->push_back(vocab_.unk_id);  // a byte without a token: only in incomplete vocabularies
    }
  }
}

std::string BpeTokenizer::NormalTokenText(int32_t id) const {
  const std::string& piece = vocab_.pieces[id];
  std::string bytes;
  bytes.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    size_t len = 0;
    const char32_t cp = unicode::DecodeUtf8(piece, pos, &len);
    auto it = symbol_to_byte_.find(cp);
    if (it != symbol_to_byte_.end()) {
      bytes.push_back(static_cast<char>(it->second));
    } else {
      bytes.append(piece, pos, len);  // not a byte-level symbol: keep as written
    }
    pos += len;
  }
  return bytes;
}

}  // namespace tpserve
