// The generated code-point class table behind model/unicode.h (see scripts/gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpserve::unicode::internal {

// Code points first..last (inclusive) all have class flags `flags` (unicode::kLetter | ...).
struct CodepointRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};

// Sorted by first, non-overlapping; code points in no range have no class.
extern const CodepointRange kCodepointRanges[];
extern const size_t kNumCodepointRanges;

}  // namespace tpserve::unicode::internal
