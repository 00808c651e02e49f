// TensorFile: a checkpoint file open for reading with pread, the one way the GGUF and safetensors
// readers (GgufFile, SafetensorsDir) touch a file's bytes. Nothing is mapped, so a file truncated
// or rewritten while open is a DATA_LOSS naming the file, what was read and where, never a SIGBUS;
// and a tensor slice goes straight from the file into its final HostTensor, with no copy out of a
// mapping (whose touched pages would also count in the process's resident memory).
// Thread-safe: pread moves no shared file offset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "model/tensor.h"

namespace tpserve {

class TensorFile {
 public:
  // Errors: NOT_FOUND (no such file, or it cannot be opened), DATA_LOSS (not a regular file).
  static StatusOr<std::unique_ptr<TensorFile>> Open(const std::string& path);
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
  // a slice of whole rows in one read, a column slice row by row.
  // Errors: INVALID_ARGUMENT naming the tensor for a range outside it, column bounds that are not
  // multiples of the type's block, or a tensor of more than 2 dimensions; DATA_LOSS as ReadAt.
  StatusOr<HostTensor> ReadSlice(const TensorInfo& info, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                 int64_t col_end) const;

 private:
  TensorFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace tpserve
