// UTF-8 encoding of one code point.
#pragma once

#include <string>

namespace tpserve {

// Appends the UTF-8 bytes of `cp` to `out`. REQUIRES: cp <= 0x10FFFF.
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace tpserve
