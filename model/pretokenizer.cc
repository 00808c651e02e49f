#include "model/pretokenizer.h"

#include "model/unicode.h"

namespace tpserve {
namespace {

// One decoded character of the text being scanned.
struct Char {
  char32_t cp;
  uint8_t flags;
  size_t offset;  // byte offset in the text
};

std::vector<Char> Decode(std::string_view text) {
  std::vector<Char> chars;  // [number of code points]
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const char32_t cp = unicode::DecodeUtf8(text, pos, &len);
    const uint8_t flags = cp == unicode::kInvalidCodepoint ? 0 : unicode::ClassFlags(cp);
    chars.push_back({cp, flags, pos});
    pos += len;
  }
  return chars;
}

// A scanner over chars[begin, end): each Match* returns the end index of the match at i, or i if
// the alternative does not match there.
class Scanner {
 public:
  Scanner(const std::vector<Char>& chars, size_t end) : c_(chars), end_(end) {}

  bool Letter(size_t i) const { return i < end_ && (c_[i].flags & unicode::kLetter); }
  bool Number(size_t i) const { return i < end_ && (c_[i].flags & unicode::kNumber); }
  bool Space(size_t i) const { return i < end_ && (c_[i].flags & unicode::kWhitespace); }
  // [^\s\p{L}\p{N}]
  bool Other(size_t i) const {
    return i < end_ && !(c_[i].flags & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber));
  }
  bool Is(size_t i, char32_t cp) const { return i < end_ && c_[i].cp == cp; }
  bool IsNewline(size_t i) const { return Is(i, '\r') || Is(i, '\n'); }
  char32_t Lower(size_t i) const {
    const char32_t cp = c_[i].cp;
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive.
  size_t Contraction(size_t i, bool ignore_case) const {
    if (!Is(i, '\'') || i + 1 >= end_) return i;
    auto at = [&](size_t k) { return ignore_case ? Lower(k) : c_[k].cp; };
    const char32_t a = at(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < end_) {
      const char32_t b = at(i + 2);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    return i;
  }

  template <typename Pred>
  size_t Run(size_t i, Pred pred) const {
    while (pred(i)) ++i;
    return i;
  }

  // " ?X+" for a class X.
  template <typename Pred>
  size_t SpaceThenRun(size_t i, Pred pred) const {
    const size_t start = Is(i, ' ') && pred(i + 1) ? i + 1 : i;
    const size_t end = Run(start, pred);
    return end == start ? i : end;
  }

  // \s+(?!\S)|\s+ : a whitespace run, less its last character when a non-space follows it and
  // the run is longer than one character.
  size_t TrailingSpace(size_t i) const {
    const size_t end = Run(i, [&](size_t k) { return Space(k); });
    if (end == i) return i;
    if (end < end_ && end - i > 1) return end - 1;
    return end;
  }

  size_t end() const { return end_; }

 private:
  const std::vector<Char>& c_;
  size_t end_;
};

size_t MatchGpt2(const Scanner& s, size_t i) {
  size_t e;
  if ((e = s.Contraction(i, /*ignore_case=*/false)) != i) return e;
  if ((e = s.SpaceThenRun(i, [&](size_t k) { return s.Letter(k); })) != i) return e;
  if ((e = s.SpaceThenRun(i, [&](size_t k) { return s.Number(k); })) != i) return e;
  if ((e = s.SpaceThenRun(i, [&](size_t k) { return s.Other(k); })) != i) return e;
  if ((e = s.TrailingSpace(i)) != i) return e;
  return i + 1;  // unreachable: every character is space, letter, number or other
}

// Llama 3 and Qwen 2 differ only in how many digits one match takes.
size_t MatchLlama3Like(const Scanner& s, size_t i, size_t max_digits) {
  size_t e;
  if ((e = s.Contraction(i, /*ignore_case=*/true)) != i) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    const bool prefix = i < s.end() && !s.IsNewline(i) && !s.Letter(i) && !s.Number(i) && s.Letter(i + 1);
    const size_t start = prefix ? i + 1 : i;
    const size_t end = s.Run(start, [&](size_t k) { return s.Letter(k); });
    if (end != start) return end;
  }
  // \p{N}{1,max_digits}
  if (s.Number(i)) {
    e = i + 1;
    while (e < i + max_digits && s.Number(e)) ++e;
    return e;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if ((e = s.SpaceThenRun(i, [&](size_t k) { return s.Other(k); })) != i) {
    return s.Run(e, [&](size_t k) { return s.IsNewline(k); });
  }
  // \s*[\r\n]+ : through the last newline of the whitespace run
  {
    const size_t end = s.Run(i, [&](size_t k) { return s.Space(k); });
    for (size_t k = end; k > i; --k) {
      if (s.IsNewline(k - 1)) return k;
    }
  }
  if ((e = s.TrailingSpace(i)) != i) return e;
  return i + 1;
}

size_t MatchLlama3(const Scanner& s, size_t i) { return MatchLlama3Like(s, i, 3); }
size_t MatchQwen2(const Scanner& s, size_t i) { return MatchLlama3Like(s, i, 1); }

void Split(const std::vector<Char>& chars, size_t begin, size_t end, size_t (*match)(const Scanner&, size_t),
           std::string_view text, std::vector<std::string_view>* out) {
  const Scanner scanner(chars, end);
  auto offset = [&](size_t i) { return i < chars.size() ? chars[i].offset : text.size(); };
  for (size_t i = begin; i < end;) {
    const size_t e = match(scanner, i);
    out->push_back(text.substr(offset(i), offset(e) - offset(i)));
    i = e;
  }
}

}  // namespace

std::optional<PreTokenizerKind> PreTokenizerFromName(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2") return PreTokenizerKind::kGpt2;
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3") return PreTokenizerKind::kLlama3;
  if (name == "smollm" || name == "starcoder" || name == "refact") return PreTokenizerKind::kSmolLM;
  if (name == "qwen2") return PreTokenizerKind::kQwen2;
  return std::nullopt;
}

const char* PreTokenizerName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2: return "gpt2";
    case PreTokenizerKind::kLlama3: return "llama3";
    case PreTokenizerKind::kSmolLM: return "smollm";
    case PreTokenizerKind::kQwen2: return "qwen2";
  }
  return "?";
}

std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text) {
  const std::vector<Char> chars = Decode(text);
  std::vector<std::string_view> out;
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      Split(chars, 0, chars.size(), MatchGpt2, text, &out);
      break;
    case PreTokenizerKind::kLlama3:
      Split(chars, 0, chars.size(), MatchLlama3, text, &out);
      break;
    case PreTokenizerKind::kQwen2:
      Split(chars, 0, chars.size(), MatchQwen2, text, &out);
      break;
    case PreTokenizerKind::kSmolLM: {
      // Each number character alone; the GPT-2 pattern within each run between them.
      size_t run_begin = 0;
      for (size_t i = 0; i <= chars.size(); ++i) {
        const bool is_number = i < chars.size() && (chars[i].flags & unicode::kNumber);
        if (i < chars.size() && !is_number) continue;
        Split(chars, run_begin, i, MatchGpt2, text, &out);
        if (is_number) Split(chars, i, i + 1, MatchGpt2, text, &out);
        run_begin = i + 1;
      }
      break;
    }
  }
  return out;
}

}  // namespace tpserve
