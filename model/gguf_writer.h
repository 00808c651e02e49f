// GgufWriter: writes a GGUF (v3 by default) file, streaming tensor data so that a model larger
// than memory can be written piece by piece.
//
// Use: Set*() metadata and AddTensor() every tensor (in file order), then Open(path) writes the
// header, metadata and tensor table; then WriteTensorData() the bytes of the tensors in the order
// they were added, in as many pieces as convenient; then Finish(). Tensor data is aligned to
// `alignment` (32 unless set_alignment; a non-default value is recorded as general.alignment).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gguf_file.h"
#include "model/tensor.h"

namespace tpserve {

class GgufWriter {
 public:
  GgufWriter() = default;
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Header options. REQUIRES: before Open. version 2 or 3 (the layouts are the same on
  // little-endian machines); alignment a power of two.
  void set_version(uint32_t version);
  void set_alignment(uint32_t alignment);

  // Metadata, kept in insertion order; setting a key again replaces its value in place.
  void SetU32(const std::string& key, uint32_t v);
  void SetI32(const std::string& key, int32_t v);
  void SetU64(const std::string& key, uint64_t v);
  void SetF32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  // Any value as GgufFile reads it (scalars from .i/.f, arrays from ints/floats/strings).
  void SetValue(const std::string& key, const GgufValue& v);

  // Declares a tensor; shape outermost first as in TensorInfo. REQUIRES: before Open, a new name,
  // innermost dimension a multiple of the type's block.
  void AddTensor(const std::string& name, DType type, const std::vector<int64_t>& shape);
  // Bytes of a declared tensor (TensorInfo::nbytes).
  uint64_t TensorBytes(size_t index) const;
  size_t num_tensors() const { return tensors_.size(); }

  // Creates `path` and writes everything up to the first tensor's data. INVALID_ARGUMENT if it
  // cannot create the file.
  Status Open(const std::string& path);
  // Appends `n` bytes to the tensors in declaration order (a piece may span tensors); the
  // alignment padding between tensors is inserted automatically. INVALID_ARGUMENT if more bytes
  // are given than the tensors hold; INTERNAL on a write error.
  Status WriteTensorData(const void* data, uint64_t n);
  // Convenience: the whole data of the next tensor, which must be exactly `t`'s bytes.
  Status WriteTensor(const HostTensor& t);
  // FAILED_PRECONDITION if some tensor data is missing; INTERNAL on a write/close error.
  Status Finish();

 private:
  struct Entry {
    std::string key;
    GgufValue value;
  };
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    uint64_t offset;  // within the data section
  };
  GgufValue& Slot(const std::string& key);
  Status Write(const void* p, uint64_t n);
  Status Pad(uint64_t to_multiple);

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<Entry> metadata_;
  std::vector<PendingTensor> tensors_;
  std::string path_;
  std::FILE* out_ = nullptr;
  uint64_t written_ = 0;       // bytes written to the file so far
  uint64_t data_start_ = 0;    // file offset of the data section
  size_t current_ = 0;         // tensor receiving data
  uint64_t current_done_ = 0;  // bytes of it written
};

}  // namespace tpserve
