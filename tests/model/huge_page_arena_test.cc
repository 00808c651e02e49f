// HugePageArena: aligned, disjoint, writable allocations; regions that ask for huge pages and go away with
// their last allocation; the sysfs setting read as the kernel writes it.
#include "model/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

// Whether the page holding p is mapped (mincore fails with ENOMEM on an unmapped page).
bool Mapped(const void* p) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  unsigned char resident = 0;
  return ::mincore(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / page * page), 1, &resident) == 0;
}

TEST(HugePageArenaTest, AllocationsAreAlignedDisjointAndWritable) {
  HugePageArena arena;
  const std::vector<size_t> sizes = {0, 1, 63, 64, 65, 4096, size_t{3} << 20, 100};
  std::vector<std::shared_ptr<uint8_t>> blocks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    blocks.push_back(arena.Allocate(sizes[i]));
    ASSERT_NE(blocks.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks.back().get()) % 64, 0u) << sizes[i];
    std::memset(blocks.back().get(), static_cast<int>(i + 1), sizes[i]);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (size_t b = 0; b < sizes[i]; ++b) ASSERT_EQ(blocks[i].get()[b], static_cast<uint8_t>(i + 1)) << i << " " << b;
    for (size_t j = 0; j < i; ++j) {
      EXPECT_NE(blocks[i].get(), blocks[j].get()) << "allocations " << i << " and " << j << " share an address";
    }
  }
}

TEST(HugePageArenaTest, LargerThanARegionAndPastOne) {
  HugePageArena arena;
  const size_t big = HugePageArena::kRegionBytes + 5;
  std::shared_ptr<uint8_t> a = arena.Allocate(big);
  a.get()[0] = 1;
  a.get()[big - 1] = 2;
  std::shared_ptr<uint8_t> b = arena.Allocate(HugePageArena::kRegionBytes / 2);
  std::shared_ptr<uint8_t> c = arena.Allocate(HugePageArena::kRegionBytes / 2 + 64);  // does not fit b's region
  b.get()[HugePageArena::kRegionBytes / 2 - 1] = 3;
  c.get()[0] = 4;
  EXPECT_EQ(a.get()[0] + a.get()[big - 1] + b.get()[HugePageArena::kRegionBytes / 2 - 1] + c.get()[0], 10);
}

TEST(HugePageArenaTest, ARegionGoesWithItsLastAllocation) {
  HugePageArena arena;
  std::shared_ptr<uint8_t> first = arena.Allocate(1000);
  std::shared_ptr<uint8_t> second = arena.Allocate(1000);  // the same region
  const uint8_t* address = first.get();
  first.reset();
  EXPECT_TRUE(Mapped(address)) << "unmapped while an allocation of its region lives";
  second.reset();
  EXPECT_FALSE(Mapped(address)) << "the arena kept a region nothing uses";
  std::shared_ptr<uint8_t> third = arena.Allocate(10);  // a new region
  third.get()[9] = 7;
  EXPECT_EQ(third.get()[9], 7);
}

TEST(HugePageArenaTest, RegionsAskForHugePages) {
  if (!HugePageArena::Available()) GTEST_SKIP() << "no transparent huge pages on this kernel";
  HugePageArena arena;
  std::shared_ptr<uint8_t> block = arena.Allocate(HugePageArena::kPageBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block.get()) % HugePageArena::kPageBytes, 0u) << "a region starts a page";
  const std::string flags = SmapsValue(block.get(), "VmFlags:");
  std::istringstream words(flags);
  bool hugepage = false;
  for (std::string word; words >> word;) hugepage = hugepage || word == "hg";
  EXPECT_TRUE(hugepage) << "no MADV_HUGEPAGE on the region: " << flags;
}

TEST(HugePageArenaTest, ReadsTheKernelsSetting) {
  EXPECT_TRUE(HugePageArena::AvailableFrom("always [madvise] never\n"));
  EXPECT_TRUE(HugePageArena::AvailableFrom("[always] madvise never\n"));
  EXPECT_FALSE(HugePageArena::AvailableFrom("always madvise [never]\n"));
  EXPECT_FALSE(HugePageArena::AvailableFrom(""));  // no sysfs file: no huge pages
}

}  // namespace
}  // namespace tpserve
