#include "model/unicode.h"

#include <algorithm>

#include "common/check.h"
#include "model/unicode_tables.h"

namespace tpserve::unicode {
namespace {

// Class flags of the ASCII range, computed once from the table (the pre-tokenizers' hot path).
struct AsciiFlags {
  uint8_t flags[128];
  AsciiFlags() {
    for (char32_t c = 0; c < 128; ++c) flags[c] = 0;
    for (size_t i = 0; i < internal::kNumCodepointRanges; ++i) {
      const auto& r = internal::kCodepointRanges[i];
      for (uint32_t c = r.first; c <= r.last && c < 128; ++c) flags[c] = r.flags;
    }
  }
};

// Validity of a UTF-8 lead byte: the sequence length and the allowed range of the second byte
// (Unicode Table 3-7, which excludes overlongs, surrogates and code points past U+10FFFF).
struct LeadInfo {
  int length;  // 0: never valid as a lead byte
  uint8_t second_lo, second_hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the valid sequence starting at text[pos]; if it is not valid, -k where k >= 1 is the
// length of its maximal ill-formed subpart, or 0 if the text ends inside a still-valid prefix.
int ScanSequence(std::string_view text, size_t pos) {
  const auto b = static_cast<uint8_t>(text[pos]);
  const LeadInfo lead = Lead(b);
  if (lead.length == 0) return -1;
  for (int k = 1; k < lead.length; ++k) {
    if (pos + k >= text.size()) return 0;
    const auto c = static_cast<uint8_t>(text[pos + k]);
    const uint8_t lo = k == 1 ? lead.second_lo : 0x80;
    const uint8_t hi = k == 1 ? lead.second_hi : 0xBF;
    if (c < lo || c > hi) return -k;
  }
  return lead.length;
}

}  // namespace

uint8_t ClassFlags(char32_t cp) {
  static const AsciiFlags ascii;
  if (cp < 128) return ascii.flags[cp];
  const auto* begin = internal::kCodepointRanges;
  const auto* end = begin + internal::kNumCodepointRanges;
  const auto* it = std::upper_bound(begin, end, cp, [](char32_t c, const internal::CodepointRange& r) {
    return c < r.first;
  });
  if (it == begin) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

char32_t DecodeUtf8(std::string_view text, size_t pos, size_t* length) {
  CHECK_LT(pos, text.size());
  const int n = ScanSequence(text, pos);
  if (n <= 0) {
    *length = 1;
    return kInvalidCodepoint;
  }
  *length = static_cast<size_t>(n);
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (n == 1) return b0;
  char32_t cp = b0 & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + k]) & 0x3F);
  return cp;
}

size_t AppendSanitizedUtf8(std::string_view in, bool at_end, std::string* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    const int n = ScanSequence(in, pos);
    if (n > 0) {
      out->append(in.substr(pos, n));
      pos += n;
    } else if (n < 0) {
      out->append(kReplacementCharacter);
      pos += static_cast<size_t>(-n);
    } else if (!at_end) {
      break;  // a valid prefix cut off by the end: wait for more bytes
    } else {
      out->append(kReplacementCharacter);  // the truncated tail is one maximal subpart
      pos = in.size();
    }
  }
  return pos;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendSanitizedUtf8(text, /*at_end=*/true, &out);
  return out;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const int n = ScanSequence(text, pos);
    if (n <= 0) return false;
    pos += n;
  }
  return true;
}

}  // namespace tpserve::unicode
