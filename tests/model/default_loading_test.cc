// The default weight loading (WeightLoading::kAuto, model/tensor_file.h) against the page cache's states: a
// file in 4 KiB folios, in a mix of 4 KiB and 2 MiB ones, and just written; views only where 2 MiB pages serve
// them, and always the file's bytes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/huge_page_arena.h"
#include "tests/model/gguf_test_util.h"

namespace tpserve {
namespace {

using testing_gguf::RandomTensor;
using testing_gguf::SameBytes;
using testing_gguf::TempPath;
using testing_gguf::WriteOneTensor;

// `path` as a copy of `from`: its first `big` bytes in one write, the rest 4 KiB at a time. Small writes leave
// the page cache in 4 KiB folios (large writes may give 2 MiB ones).
void CopyInWrites(const std::string& from, const std::string& path, size_t big) {
  std::ifstream in(from, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream out(path, std::ios::binary);
  big = std::min(big, bytes.size());
  out.write(bytes.data(), static_cast<std::streamsize>(big));
  out.flush();
  for (size_t at = big; at < bytes.size(); at += 4096) {
    out.write(bytes.data() + at, static_cast<std::streamsize>(std::min<size_t>(4096, bytes.size() - at)));
    out.flush();  // one 4 KiB write() each
  }
}

// Reads "w.big" from `path` twice with the default loading and expects `big`'s bytes; where the two reads share
// their data (views of the mapping), expects nine tenths of the mapping's resident bytes in 2 MiB pages.
// Returns whether they were views.
bool LoadsFromHugePages(const std::string& path, const HostTensor& big, const std::string& what) {
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) {
    ADD_FAILURE() << file.status().ToString();
    return false;
  }
  StatusOr<HostTensor> a = (*file)->Read("w.big");
  StatusOr<HostTensor> b = (*file)->Read("w.big");
  if (!a.ok() || !b.ok()) {
    ADD_FAILURE() << "read failed: " << what;
    return false;
  }
  EXPECT_TRUE(SameBytes(*a, big.data.get(), big.nbytes())) << what;
  const bool views = a->data.get() == b->data.get();
  if (views && HugePageArena::Available()) {
    const std::string pmd = SmapsValue(a->data.get(), "FilePmdMapped:"), rss = SmapsValue(a->data.get(), "Rss:");
    EXPECT_FALSE(pmd.empty() || rss.empty()) << what;
    if (!pmd.empty() && !rss.empty()) {
      EXPECT_GE(std::stoull(pmd) * 10, std::stoull(rss) * 9)
          << "a mapping mostly in 4 KiB pages (" << pmd << " of " << rss << "): " << what;
    }
  }
  return views;
}

// The default loading never serves weights from a mapping in 4 KiB pages where the kernel has huge pages: a
// view it hands out lies in 2 MiB pages of the page cache (nine tenths of the mapping's resident bytes, at
// least), else the weights are read (into 2 MiB pages); either way they are the file's bytes. The file's cache
// is made all 4 KiB folios, then 8 MiB of one write and the rest of 4 KiB ones (where one window in the middle
// took it for huge pages).
TEST(GgufTest, DefaultLoadingViewsOnlyHugePages) {
  const std::string written = TempPath("big_written"), path = TempPath("big");
  const HostTensor big = RandomTensor(DType::kF32, 4096, 1024, 5);  // 16 MiB
  ASSERT_TRUE(WriteOneTensor(written, "w.big", big).ok());
  for (size_t big_prefix : {size_t{0}, size_t{8} << 20}) {
    CopyInWrites(written, path, big_prefix);
    LoadsFromHugePages(path, big, "first " + std::to_string(big_prefix) + " bytes in one write");
    std::remove(path.c_str());
  }
  std::remove(written.c_str());
}

// Whether `path`'s file system brings a file back in 2 MiB page-cache folios once its cached pages are dropped
// and it is read again through a MADV_HUGEPAGE mapping (what the default loading does with a file in 4 KiB ones).
bool RereadComesBackInHugeFolios(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  struct stat st;
  const size_t size = ::fstat(fd, &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
  void* reserved = size > 0 ? MapAligned2MiB(size, PROT_NONE) : nullptr;
  bool huge = false;
  if (reserved != nullptr && ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) {
    void* p = ::mmap(reserved, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p != MAP_FAILED && ::madvise(p, size, MADV_HUGEPAGE) == 0 && ::madvise(p, size, MADV_POPULATE_READ) == 0) {
      const std::string pmd = SmapsValue(p, "FilePmdMapped:");
      huge = !pmd.empty() && std::stoull(pmd) * 1024 + HugePageArena::kPageBytes >= size;
    }
  }
  if (reserved != nullptr) ::munmap(reserved, size);
  ::close(fd);
  return huge;
}

// A file just written in 4 KiB writes (as a download or a copy leaves it) is read again from disk by the
// default loading, where the file system allows, and then served from views in 2 MiB pages of the page cache.
TEST(GgufTest, DefaultLoadingReadsAFreshFileAgainInto2MiBFolios) {
  if (!HugePageArena::Available()) GTEST_SKIP() << "no transparent huge pages";
  const std::string written = TempPath("fresh_written"), path = TempPath("fresh");
  const HostTensor big = RandomTensor(DType::kF32, 4096, 1024, 6);  // 16 MiB
  ASSERT_TRUE(WriteOneTensor(written, "w.big", big).ok());
  if (!RereadComesBackInHugeFolios(written)) {
    std::remove(written.c_str());
    GTEST_SKIP() << ::testing::TempDir() << " does not bring files back in 2 MiB folios";
  }
  CopyInWrites(written, path, 0);
  EXPECT_TRUE(LoadsFromHugePages(path, big, "a fresh copy")) << "read into memory, not mapped";
  std::remove(path.c_str());
  std::remove(written.c_str());
}

// Bytes of `path` in 2 MiB pages once it is all faulted in through a MADV_HUGEPAGE mapping, after `populate`
// (the mapping's address) has run: 0 where the mapping cannot be made.
template <class Populate>
size_t HugeBytesAfter(const std::string& path, Populate populate) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st;
  const size_t size = fd >= 0 && ::fstat(fd, &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
  void* reserved = size > 0 ? MapAligned2MiB(size, PROT_NONE) : nullptr;
  size_t huge = 0;
  if (reserved != nullptr) {
    void* p = ::mmap(reserved, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p != MAP_FAILED && ::madvise(p, size, MADV_HUGEPAGE) == 0) {
      populate(static_cast<uint8_t*>(p), size);
      const std::string pmd = SmapsValue(p, "FilePmdMapped:");
      huge = pmd.empty() ? 0 : std::stoull(pmd) * 1024;
    }
    ::munmap(reserved, size);
  }
  if (fd >= 0) ::close(fd);
  return huge;
}

// A file whose cache is 2 MiB folios in some windows and 4 KiB pages in the rest, the huge ones exactly where a
// probe of a few spread windows would look (the loader's, before this test: 8 windows at the odd sixteenths of
// the file), is read again by the default loading and served from 2 MiB pages.
TEST(GgufTest, DefaultLoadingLooksAtEveryWindow) {
  if (!HugePageArena::Available()) GTEST_SKIP() << "no transparent huge pages";
  const std::string written = TempPath("mixed_written"), path = TempPath("mixed");
  const HostTensor big = RandomTensor(DType::kF32, 10240, 1024, 7);  // 40 MiB: 20 whole windows
  ASSERT_TRUE(WriteOneTensor(written, "w.big", big).ok());
  if (!RereadComesBackInHugeFolios(written)) {
    std::remove(written.c_str());
    GTEST_SKIP() << ::testing::TempDir() << " does not bring files back in 2 MiB folios";
  }
  CopyInWrites(written, path, 0);  // all 4 KiB folios
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  const size_t window = HugePageArena::kPageBytes;
  HugeBytesAfter(path, [&](uint8_t* p, size_t size) {  // the odd sixteenths' windows dropped and read again
    ::madvise(p, size, MADV_RANDOM);                   // each fault reads its own window, not the next one too
    for (size_t i = 0; i < 8; ++i) {
      const size_t at = (size - window) / 16 * (2 * i + 1) / window * window;
      ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(window), POSIX_FADV_DONTNEED);
      ::madvise(p + at, window, MADV_POPULATE_READ);
    }
  });
  ::close(fd);
  const size_t huge = HugeBytesAfter(path, [](uint8_t* p, size_t size) { ::madvise(p, size, MADV_POPULATE_READ); });
  if (huge != 8 * window) {
    std::remove(path.c_str());
    std::remove(written.c_str());
    GTEST_SKIP() << "could not lay out the mixed cache: " << huge << " bytes in 2 MiB pages";
  }
  LoadsFromHugePages(path, big, "8 of 20 windows huge");
  std::remove(path.c_str());
  std::remove(written.c_str());
}

}  // namespace
}  // namespace tpserve
