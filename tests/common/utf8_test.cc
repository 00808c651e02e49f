#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace tpserve {
namespace {

// A reference of another shape: decode the value, then apply the rules on the value.
bool ReferenceValid(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : b & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      const unsigned c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    const uint32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

TEST(Utf8Test, EveryScalarValueEncodesToValidUtf8) {
  for (char32_t cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    std::string s;
    AppendUtf8(cp, &s);
    ASSERT_TRUE(IsValidUtf8(s)) << std::hex << static_cast<uint32_t>(cp);
  }
}

TEST(Utf8Test, KnownIllFormedSequencesAreRejected) {
  for (const char* bad : {"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80",
                          "\xed\xbf\xbf", "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                          "\xff", "\xfe", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "a\xc3(b"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac"));
}

TEST(Utf8Test, AgreesWithTheReferenceOnEveryShortByteString) {
  // Every 1- and 2-byte string, and every 3-byte string led by a byte >= 0xc0 (the interesting ones).
  for (int a = 0; a < 256; ++a) {
    const std::string one(1, static_cast<char>(a));
    ASSERT_EQ(IsValidUtf8(one), ReferenceValid(one)) << a;
    for (int b = 0; b < 256; ++b) {
      const std::string two = one + static_cast<char>(b);
      ASSERT_EQ(IsValidUtf8(two), ReferenceValid(two)) << a << " " << b;
      if (a < 0xc0) continue;
      for (int c = 0; c < 256; ++c) {
        const std::string three = two + static_cast<char>(c);
        ASSERT_EQ(IsValidUtf8(three), ReferenceValid(three)) << a << " " << b << " " << c;
        const std::string four = three + "\x80";
        ASSERT_EQ(IsValidUtf8(four), ReferenceValid(four)) << a << " " << b << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
