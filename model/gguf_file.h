// GgufFile: a GGUF (v2/v3) file. The header, metadata and tensor table are read (pread, through
// TensorFile) and validated on Open; tensor data stays in the file until a slice is asked for, then is
// a view of the file's mapping or read into 2 MiB pages (WeightLoading, tensor_file.h). A file
// truncated while open makes a later slice a DATA_LOSS, never a crash (tensor_file.h: in kMap a view
// already handed out faults).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/tensor_file.h"
#include "model/weight_source.h"

namespace tpserve {

// One metadata value. Arrays keep their element type; strings are byte strings as stored.
struct GgufValue {
  enum class Type : uint32_t {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
  };
  Type type = Type::kU32;
  Type array_type = Type::kU32;  // element type when type == kArray
  // Scalars of every numeric kind are kept in both forms.
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;         // integer/bool arrays
  std::vector<double> floats;        // float arrays
  std::vector<std::string> strings;  // string arrays
};

class GgufFile : public WeightSource {
 public:
  // Errors: NOT_FOUND (no file), DATA_LOSS naming the file and what is wrong (bad magic,
  // unsupported version, truncated, counts or lengths past the end, misaligned or overlapping
  // tensor, unknown tensor type). Never allocates more than the file could hold.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path,
                                                  WeightLoading loading = WeightLoading::kAuto);
  ~GgufFile() override;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }

  // nullptr if the key is absent.
  const GgufValue* Get(const std::string& key) const;
  // Typed getters: NOT_FOUND if absent, INVALID_ARGUMENT if of another type.
  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<double> GetFloat(const std::string& key) const;
  StatusOr<std::string> GetString(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }

  // WeightSource
  const TensorInfo* Find(const std::string& name) const override;
  std::vector<std::string> Names() const override;
  StatusOr<HostTensor> ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                 int64_t col_begin, int64_t col_end) const override;

 private:
  GgufFile() = default;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t size_ = 0;
  std::unique_ptr<TensorFile> file_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace tpserve
