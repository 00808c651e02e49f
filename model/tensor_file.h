// TensorFile: a checkpoint file open for reading, the one way the GGUF and safetensors readers
// (GgufFile, SafetensorsDir) touch a file's bytes. Tensor slices reach memory in one of two ways:
//
//   mapped: the file is mapped read-only once (MADV_HUGEPAGE), and a slice of whole rows is a view of the
//     mapping (HostTensor's shared_ptr keeps the mapping alive), its pages populated as it is handed out
//     (MADV_POPULATE_READ). Nothing is copied, and the pages are the page cache's, shared by every process
//     mapping the file. A file truncated before a slice is handed out is a DATA_LOSS; one truncated while its
//     pages are in use is a SIGBUS on the next access (as in llama.cpp, whose default is to map).
//   read: every slice is pread into the file's HugePageArena, in 2 MiB pages where the kernel gives them. A
//     file truncated or rewritten while open is a DATA_LOSS naming the file, what was read and where.
//
// Decode streams every weight once per step, and from 4 KiB pages it runs much slower than from 2 MiB ones
// (model/huge_page_arena.h). A mapping gets 2 MiB pages only where the page cache holds the file in 2 MiB
// folios: a file read from disk with the hint does (readahead), one just written (downloaded, quantised) does
// not until its pages are evicted. So WeightLoading::kAuto, the default, maps the file, faults it all in and
// keeps the mapping if nine tenths of its 2 MiB windows are mapped as huge pages. If not, on a local block
// file system (ext4, XFS, Btrfs), it drops the file's cached pages (written back first; pages another process
// maps stay) and probes again, which reads the file from disk into 2 MiB folios; if still not, it reads (all
// this where the kernel has transparent huge pages; a file under 4 MiB is always mapped). kMap (--mmap) and
// kRead (--no-mmap) force one.
//
// Column slices, and views whose data would not be 32-byte aligned, are read whatever the mode. The header
// is always read with ReadAt. Thread-safe: pread moves no shared file offset.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "model/huge_page_arena.h"
#include "model/tensor.h"

namespace tpserve {

enum class WeightLoading {
  kAuto,  // mapped where the page cache gives 2 MiB pages (after reading the file again if need be), else read
  kMap,   // whole-row slices are views of a read-only mapping of the file (--mmap)
  kRead,  // every slice is pread into 2 MiB pages (--no-mmap)
};

// --mmap's and --no-mmap's help, for the programs that load a model (llama.cpp's flags).
inline constexpr const char* kMmapHelp =
    "use the weights in place from a read-only mapping of the model file, even where the page cache holds it in "
    "4 KiB pages (by default it is then read again from disk, or read into memory, in 2 MiB pages: decode runs "
    "faster in them)";
inline constexpr const char* kNoMmapHelp =
    "read the weights into memory, in 2 MiB pages where the kernel gives them, even where a mapping would have "
    "them (a file truncated under the running process then cannot SIGBUS it)";
// The loading the two flags ask for (at most one set).
inline WeightLoading WeightLoadingFromFlags(bool mmap, bool no_mmap) {
  return mmap ? WeightLoading::kMap : no_mmap ? WeightLoading::kRead : WeightLoading::kAuto;
}

class TensorFile {
 public:
  // Errors: NOT_FOUND (no such file, or it cannot be opened), DATA_LOSS (not a regular file). A file
  // that cannot be mapped (empty, or a file system without mmap) is read as with kRead.
  static StatusOr<std::unique_ptr<TensorFile>> Open(const std::string& path,
                                                    WeightLoading loading = WeightLoading::kAuto);
  ~TensorFile();
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // at Open

  // Reads exactly n bytes at `offset` into out. DATA_LOSS naming the file, `what` and the offset
  // when the file now ends before offset + n (it shrank since Open) or the read fails.
  Status ReadAt(uint64_t offset, void* out, uint64_t n, const std::string& what) const;

  // Rows [row_begin, row_end) x columns [col_begin, col_end) of the tensor `info`, whose data
  // starts at byte info.offset of this file (rows of DTypeRowBytes(info.type, info.cols()) bytes):
  // a slice of whole rows is a view of the mapping (read-only: never write through its data) or one
  // read; a column slice is read row by row.
  // Errors: INVALID_ARGUMENT naming the tensor for a range outside it, column bounds that are not
  // multiples of the type's block, or a tensor of more than 2 dimensions; DATA_LOSS as ReadAt (for a
  // view: the file now ends before the slice).
  StatusOr<HostTensor> ReadSlice(const TensorInfo& info, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                 int64_t col_end) const;

 private:
  TensorFile(std::string path, int fd, uint64_t size, WeightLoading loading)
      : path_(std::move(path)), fd_(fd), size_(size), loading_(loading) {}

  // Whether whole-row slices are views of the mapping: decided at the first slice (kAuto probes the page
  // cache then, so opening a file for its metadata costs nothing).
  bool UsesMapping() const;

  // Faults in the mapped bytes [offset, offset + n) as readable pages. DATA_LOSS when they lie past
  // the file's end now.
  Status Populate(uint64_t offset, uint64_t n, const std::string& what) const;
  Status Truncated(uint64_t offset, uint64_t end, uint64_t n, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  WeightLoading loading_;
  mutable std::shared_ptr<uint8_t> mapping_;  // [size_] the read-only mapping; null when read
  mutable std::once_flag decided_;
  mutable bool uses_mapping_ = false;
  mutable HugePageArena arena_;       // what slices are read into
};

}  // namespace tpserve
