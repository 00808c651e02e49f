#include "model/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "common/check.h"

namespace tpserve {

void* MapAligned2MiB(size_t bytes, int prot) {
  const size_t huge = HugePageArena::kPageBytes, reserved = bytes + huge;  // room to spare, the spare unmapped
  void* p = ::mmap(nullptr, reserved, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto raw = reinterpret_cast<uintptr_t>(p), end = raw + reserved;
  const uintptr_t aligned = (raw + huge - 1) / huge * huge;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t used_end = (aligned + bytes + page - 1) / page * page;
  if (aligned > raw) ::munmap(p, aligned - raw);
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  return reinterpret_cast<void*>(aligned);
}

// `bytes` of address space starting on a 2 MiB boundary.
struct HugePageArena::Region {
  explicit Region(size_t size) : bytes(size) {
    void* p = MapAligned2MiB(bytes, PROT_READ | PROT_WRITE);
    CHECK(p != nullptr) << "out of address space reserving " << bytes << " bytes for weights";
    base = static_cast<uint8_t*>(p);
    // Advice only: without transparent huge pages the region works in 4 KiB pages.
    ::madvise(base, bytes, MADV_HUGEPAGE);
  }
  ~Region() { ::munmap(base, bytes); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  uint8_t* base = nullptr;
  size_t bytes;
};

std::shared_ptr<uint8_t> HugePageArena::Allocate(size_t bytes) {
  const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Region> region = region_.lock();
  if (region == nullptr || region->bytes - used_ < size) {
    region = std::make_shared<Region>(std::max(kRegionBytes, (size + kPageBytes - 1) / kPageBytes * kPageBytes));
    region_ = region;
    used_ = 0;
  }
  uint8_t* p = region->base + used_;
  used_ += size;
  return std::shared_ptr<uint8_t>(region, p);  // holds the region
}

std::string SmapsValue(const void* address, std::string_view key) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t space = line.find(' '), dash = line.find('-');
    if (dash != std::string::npos && dash < space && line[space - 1] != ':') {  // "begin-end perms ...": an entry
      inside = std::stoull(line.substr(0, dash), nullptr, 16) <= at &&
               at < std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    } else if (inside && line.compare(0, key.size(), key) == 0) {
      const size_t value = line.find_first_not_of(' ', key.size());
      return value == std::string::npos ? std::string() : line.substr(value);
    }
  }
  return "";
}

bool HugePageArena::AvailableFrom(std::string_view enabled) {
  return enabled.find("[always]") != std::string_view::npos || enabled.find("[madvise]") != std::string_view::npos;
}

bool HugePageArena::Available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << in.rdbuf();
  return AvailableFrom(text.str());
}

}  // namespace tpserve
