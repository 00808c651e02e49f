// How many bytes a benchmark cycles its operands through so that they come from memory, not from cache.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace tpserve::bench {

// At least `floor`, and twice the last-level cache the C library reports, at most 1 GiB. The Sapphire Rapids
// VM of bench/README.md reports 480 MiB (more than the chip has) while two threads there read 42-48 GB/s
// from a 64 MB buffer and 27 GB/s from 128 MB: a fixed 96 MB of copies still came partly from cache.
inline int64_t BytesPastCache(int64_t floor) {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<int64_t>(floor, std::min<int64_t>(int64_t{1} << 30, llc > 0 ? 2 * int64_t{llc} : 0));
}

}  // namespace tpserve::bench
