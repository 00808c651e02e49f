// Unicode helpers for the tokenizers: UTF-8 decoding and encoding, the general-category classes
// that pre-tokenizer patterns use (\p{L}, \p{N}, \s, ...), and UTF-8 sanitising that replaces
// invalid bytes with U+FFFD the same way whether the text arrives whole or in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace tpserve::unicode {

// Class flags of a code point; a code point may carry several (e.g. U+0085 is control + space).
enum CodepointClass : uint8_t {
  kLetter = 1,       // L*
  kNumber = 2,       // N*
  kWhitespace = 4,   // White_Space property (what \s matches)
  kPunctuation = 8,  // P*
  kSymbol = 16,      // S*
  kMark = 32,        // M*
  kControl = 64,     // Cc
};

uint8_t ClassFlags(char32_t cp);
inline bool IsLetter(char32_t cp) { return ClassFlags(cp) & kLetter; }
inline bool IsNumber(char32_t cp) { return ClassFlags(cp) & kNumber; }
inline bool IsWhitespace(char32_t cp) { return ClassFlags(cp) & kWhitespace; }
inline bool IsPunctuation(char32_t cp) { return ClassFlags(cp) & kPunctuation; }
inline bool IsSymbol(char32_t cp) { return ClassFlags(cp) & kSymbol; }
inline bool IsMark(char32_t cp) { return ClassFlags(cp) & kMark; }

// Value returned for a byte that does not start a valid UTF-8 sequence. It has no class flags, so
// a scanner treats a stray byte as one "other" character of length 1.
inline constexpr char32_t kInvalidCodepoint = 0xFFFFFFFF;

// Decodes the code point starting at text[pos] and returns it with its length in bytes (>= 1).
// REQUIRES: pos < text.size(). An invalid or truncated sequence yields kInvalidCodepoint, length 1.
char32_t DecodeUtf8(std::string_view text, size_t pos, size_t* length);

using ::tpserve::AppendUtf8;  // common/utf8.h

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Appends `in` to *out with every maximal ill-formed subpart replaced by one U+FFFD (the Unicode
// "substitution of maximal subparts" practice, as WHATWG decoders and HF tokenizers do).
// When !at_end, an incomplete sequence at the end of `in` that could still become valid is left
// unconsumed. Returns the number of bytes of `in` consumed (all of them when at_end).
// Feeding a byte stream piece by piece (the leftover carried to the next call, at_end on the
// last) gives exactly the output of one call on the whole stream.
size_t AppendSanitizedUtf8(std::string_view in, bool at_end, std::string* out);

// The whole of `text`, sanitised as above.
std::string SanitizeUtf8(std::string_view text);

bool IsValidUtf8(std::string_view text);

}  // namespace tpserve::unicode
