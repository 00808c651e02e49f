// UTF-8: encoding one code point, and checking that bytes are well-formed UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace tpserve {

// Appends the UTF-8 bytes of `cp` to `out`. REQUIRES: cp <= 0x10FFFF.
void AppendUtf8(char32_t cp, std::string* out);

// True when `text` is well-formed UTF-8 (Unicode 15, table 3-7): no overlong forms, no surrogates,
// nothing above U+10FFFF, no truncated sequence.
bool IsValidUtf8(std::string_view text);

}  // namespace tpserve
