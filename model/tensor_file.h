// TensorFile: a checkpoint file open for reading, the one way the GGUF and safetensors readers
// (GgufFile, SafetensorsDir) touch a file's bytes. Tensor slices reach memory one of two ways:
//
//   WeightLoading::kMap (the default): the file is mapped read-only once, and a slice of whole rows
//     is a view of the mapping (HostTensor's shared_ptr keeps the mapping alive), its pages populated
//     as it is handed out (MADV_POPULATE_READ). Nothing is copied, and the pages are the page cache's,
//     shared by every process mapping the file. A file truncated before a slice is handed out is a
//     DATA_LOSS; one truncated while its pages are in use is a SIGBUS on the next access (as in
//     llama.cpp, whose default this is).
//   WeightLoading::kRead (--no-mmap): every slice is pread straight into its own buffer, so a file
//     truncated or rewritten while open is a DATA_LOSS naming the file, what was read and where.
//
// Column slices, and views whose data would not be 32-byte aligned, are read as in kRead whatever the
// mode. The header is always read with ReadAt. Thread-safe: pread moves no shared file offset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "model/tensor.h"

namespace tpserve {

enum class WeightLoading {
  kMap,   // whole-row slices are views of a read-only mapping of the file
  kRead,  // every slice is pread into its own buffer (--no-mmap)
};

// --no-mmap's help, for the programs that load a model (llama.cpp's flag).
inline constexpr const char* kNoMmapHelp =
    "read the weights into memory instead of using them in place from a mapping of the model file (slower to "
    "load; a file truncated under the running process then cannot SIGBUS it)";
inline WeightLoading WeightLoadingFromFlag(bool no_mmap) { return no_mmap ? WeightLoading::kRead : WeightLoading::kMap; }

class TensorFile {
 public:
  // Errors: NOT_FOUND (no such file, or it cannot be opened), DATA_LOSS (not a regular file). A file
  // that cannot be mapped (empty, or a file system without mmap) is read as with kRead.
  static StatusOr<std::unique_ptr<TensorFile>> Open(const std::string& path,
                                                    WeightLoading loading = WeightLoading::kMap);
  ~TensorFile();
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // at Open
  bool is_mapped() const { return mapping_ != nullptr; }

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
  TensorFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}

  // Faults in the mapped bytes [offset, offset + n) as readable pages. DATA_LOSS when they lie past
  // the file's end now.
  Status Populate(uint64_t offset, uint64_t n, const std::string& what) const;
  Status Truncated(uint64_t offset, uint64_t end, uint64_t n, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::shared_ptr<uint8_t> mapping_;  // [size_] the read-only mapping; null with kRead
};

}  // namespace tpserve
