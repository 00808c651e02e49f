// HugePageArena: the memory that weights are read into, in 2 MiB pages where the kernel gives them
// (transparent huge pages, asked for with MADV_HUGEPAGE).
//
// Decode streams every weight once per step. In 4 KiB pages that is a TLB miss and a new hardware-prefetch
// stream every 4 KiB: SmolLM2 F16, one thread, read into 2 MiB pages against used in place from the mapped file,
// tok/s 40-42 against 32-33; Q4_1 153 against 100 (bench/README.md, "Weights in 2 MiB pages"). The page
// cache's pages of a mapped file are 4 KiB here (ext4 offers no file huge pages).
//
// Allocations are bump-allocated, 64-byte aligned, from regions reserved 2 MiB-aligned with MAP_NORESERVE:
// a region costs memory only where it is written, in whole 2 MiB pages. A region is unmapped when every
// allocation from it is gone (each allocation's shared_ptr holds its region; the arena does not), so host
// copies dropped after an upload to a GPU give their memory back. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace tpserve {

class HugePageArena {
 public:
  HugePageArena() = default;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // `bytes` (0 allowed) of writable memory, 64-byte aligned, uninitialised. Aborts when out of address space,
  // as an allocation does.
  std::shared_ptr<uint8_t> Allocate(size_t bytes);

  // Whether this kernel gives huge pages to a region that asks (MADV_HUGEPAGE): THP `always` or `madvise`.
  static bool Available();
  // The same from the text of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
  static bool AvailableFrom(std::string_view enabled);

  static constexpr size_t kPageBytes = size_t{2} << 20;
  static constexpr size_t kRegionBytes = size_t{256} << 20;  // address space per region, not memory

 private:
  struct Region;
  std::mutex mu_;
  std::weak_ptr<Region> region_;  // the one allocations come from now, while any of its allocations lives
  size_t used_ = 0;                 // bytes of region_ handed out
};

// `bytes` of anonymous address space (MAP_NORESERVE) starting on a 2 MiB boundary, with protection `prot`; null
// when out of address space. The caller unmaps it (munmap of the bytes), or maps over it with MAP_FIXED.
void* MapAligned2MiB(size_t bytes, int prot);

// The text after `key` (e.g. "FilePmdMapped:", "VmFlags:") in the /proc/self/smaps entry of the mapping that holds
// `address`, leading blanks dropped; empty when there is no such mapping or line.
std::string SmapsValue(const void* address, std::string_view key);

}  // namespace tpserve
