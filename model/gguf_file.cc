#include "model/gguf_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tpserve {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;               // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;

using Type = GgufValue::Type;

// Size in bytes of a scalar metadata type; 0 for strings and arrays (variable).
uint64_t ScalarSize(Type t) {
  switch (t) {
    case Type::kU8: case Type::kI8: case Type::kBool: return 1;
    case Type::kU16: case Type::kI16: return 2;
    case Type::kU32: case Type::kI32: case Type::kF32: return 4;
    case Type::kU64: case Type::kI64: case Type::kF64: return 8;
    case Type::kString: case Type::kArray: return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(Type::kF64); }
bool IsFloatType(Type t) { return t == Type::kF32 || t == Type::kF64; }

// Bounds-checked little-endian reader of the header, through a window of the file refilled with
// pread as the parse moves on. Every read that would pass the end of the file (as opened) fails with
// DATA_LOSS naming what was being read; so does a file that shrinks under the parse (TensorFile).
class Cursor {
 public:
  explicit Cursor(const TensorFile& file) : file_(file), size_(file.size()) {}

  const std::string& path() const { return file_.path(); }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status Error(const std::string& what) const {
    return DataLoss(file_.path() + ": " + what + " (at byte " + std::to_string(pos_) + " of " +
                    std::to_string(size_) + ")");
  }

  // `name()` spells out what is read, called only for an error message: a vocabulary's 50k strings
  // would otherwise build 100k message strings that are never used (most of a SmolLM2 Open).
  template <class Name>
  Status BytesNamed(void* out, uint64_t n, const Name& name) {
    if (n > remaining()) return Error("truncated: " + name() + " runs past the end of the file");
    uint8_t* dst = static_cast<uint8_t*>(out);
    while (n > 0) {
      if (pos_ < window_begin_ || pos_ >= window_begin_ + window_.size()) {
        window_.resize(static_cast<size_t>(std::min<uint64_t>(kWindowBytes, size_ - pos_)));
        window_begin_ = pos_;
        RETURN_IF_ERROR(file_.ReadAt(pos_, window_.data(), window_.size(), "the header (" + name() + ")"));
      }
      const uint64_t offset = pos_ - window_begin_;
      const uint64_t take = std::min<uint64_t>(n, window_.size() - offset);
      std::memcpy(dst, window_.data() + offset, take);
      dst += take;
      pos_ += take;
      n -= take;
    }
    return OkStatus();
  }
  Status Bytes(void* out, uint64_t n, const std::string& what) {
    return BytesNamed(out, n, [&] { return what; });
  }
  Status U32(uint32_t* out, const std::string& what) { return Bytes(out, 4, what); }
  Status U64(uint64_t* out, const std::string& what) { return Bytes(out, 8, what); }

  template <class Name>
  Status StringNamed(std::string* out, const Name& name) {
    uint64_t len = 0;
    RETURN_IF_ERROR(BytesNamed(&len, 8, [&] { return name() + " length"; }));
    if (len > remaining()) {
      return Error(name() + " length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) +
                   " bytes left in the file");
    }
    out->resize(len);
    return BytesNamed(out->data(), len, name);
  }
  Status String(std::string* out, const std::string& what) {
    return StringNamed(out, [&] { return what; });
  }

  // Reads one scalar of type t into value->i / value->f.
  Status Scalar(Type t, int64_t* i, double* f, const std::string& what) {
    uint8_t buf[8] = {};
    RETURN_IF_ERROR(Bytes(buf, ScalarSize(t), what));
    auto load = [&](auto v) {
      std::memcpy(&v, buf, sizeof(v));
      return v;
    };
    switch (t) {
      case Type::kU8: *i = load(uint8_t{}); break;
      case Type::kI8: *i = load(int8_t{}); break;
      case Type::kBool: *i = load(uint8_t{}) != 0; break;
      case Type::kU16: *i = load(uint16_t{}); break;
      case Type::kI16: *i = load(int16_t{}); break;
      case Type::kU32: *i = load(uint32_t{}); break;
      case Type::kI32: *i = load(int32_t{}); break;
      case Type::kU64: *i = static_cast<int64_t>(load(uint64_t{})); break;
      case Type::kI64: *i = load(int64_t{}); break;
      case Type::kF32: *f = load(float{}); break;
      case Type::kF64: *f = load(double{}); break;
      case Type::kString: case Type::kArray: return Error("internal: not a scalar");
    }
    if (IsFloatType(t)) {
      // Only a value that fits has an integer view (a NaN or 1e300 cast to int64 is undefined).
      *i = std::fabs(*f) < 0x1p63 ? static_cast<int64_t>(*f) : 0;
    } else {
      *f = static_cast<double>(*i);
    }
    return OkStatus();
  }

 private:
  static constexpr uint64_t kWindowBytes = 1 << 20;

  const TensorFile& file_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::vector<uint8_t> window_;  // bytes [window_begin_, window_begin_ + window_.size()) of the file
  uint64_t window_begin_ = 0;
};

Status ReadValue(Cursor* c, Type type, GgufValue* out, const std::string& what) {
  out->type = type;
  if (type == Type::kString) return c->String(&out->s, what);
  if (type != Type::kArray) return c->Scalar(type, &out->i, &out->f, what);

  uint32_t elem = 0;
  RETURN_IF_ERROR(c->U32(&elem, what + " element type"));
  if (!IsKnownType(elem)) return c->Error(what + ": unknown array element type " + std::to_string(elem));
  const Type et = static_cast<Type>(elem);
  if (et == Type::kArray) return c->Error(what + ": nested arrays are not supported");
  out->array_type = et;
  uint64_t n = 0;
  RETURN_IF_ERROR(c->U64(&n, what + " array length"));
  // Each element takes at least its scalar size (8 bytes of length for a string): bound the count
  // by what the rest of the file could hold before allocating anything.
  const uint64_t min_elem = et == Type::kString ? 8 : ScalarSize(et);
  if (n > c->remaining() / min_elem) {
    return c->Error(what + ": array length " + std::to_string(n) + " exceeds what the file could hold");
  }
  if (et == Type::kString) {
    out->strings.resize(n);
    for (uint64_t k = 0; k < n; ++k) {
      RETURN_IF_ERROR(c->StringNamed(&out->strings[k], [&] { return what + "[" + std::to_string(k) + "]"; }));
    }
  } else if (IsFloatType(et)) {
    out->floats.resize(n);
    int64_t ignored = 0;
    for (uint64_t k = 0; k < n; ++k) RETURN_IF_ERROR(c->Scalar(et, &ignored, &out->floats[k], what));
  } else {
    out->ints.resize(n);
    double ignored = 0;
    for (uint64_t k = 0; k < n; ++k) RETURN_IF_ERROR(c->Scalar(et, &out->ints[k], &ignored, what));
  }
  return OkStatus();
}

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path, WeightLoading loading) {
  ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> tensor_file, TensorFile::Open(path, loading));
  const uint64_t size = tensor_file->size();
  if (size < 24) {
    return DataLoss(path + ": truncated: " + std::to_string(size) + " bytes is shorter than a GGUF header");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->size_ = size;
  file->file_ = std::move(tensor_file);

  Cursor c(*file->file_);
  uint32_t magic = 0;
  RETURN_IF_ERROR(c.U32(&magic, "magic"));
  if (magic != kGgufMagic) return c.Error("bad magic: not a GGUF file");
  RETURN_IF_ERROR(c.U32(&file->version_, "version"));
  if (file->version_ != 2 && file->version_ != 3) {
    return c.Error("unsupported GGUF version " + std::to_string(file->version_) + " (2 and 3 are supported)");
  }
  uint64_t num_tensors = 0, num_kv = 0;
  RETURN_IF_ERROR(c.U64(&num_tensors, "tensor count"));
  RETURN_IF_ERROR(c.U64(&num_kv, "metadata count"));
  // A metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor entry at least
  // 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
  if (num_kv > c.remaining() / 13) {
    return c.Error("metadata count " + std::to_string(num_kv) + " exceeds what the file could hold");
  }
  if (num_tensors > c.remaining() / 24) {
    return c.Error("tensor count " + std::to_string(num_tensors) + " exceeds what the file could hold");
  }

  for (uint64_t k = 0; k < num_kv; ++k) {
    std::string key;
    RETURN_IF_ERROR(c.String(&key, "metadata key " + std::to_string(k)));
    uint32_t type = 0;
    RETURN_IF_ERROR(c.U32(&type, "type of metadata " + key));
    if (!IsKnownType(type)) return c.Error("metadata " + key + " has unknown type " + std::to_string(type));
    GgufValue value;
    RETURN_IF_ERROR(ReadValue(&c, static_cast<Type>(type), &value, "metadata " + key));
    if (!file->metadata_.emplace(std::move(key), std::move(value)).second) {
      return c.Error("duplicate metadata key");
    }
  }

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = file->Get("general.alignment")) {
    if (a->type != Type::kU32 || a->i <= 0 || (a->i & (a->i - 1)) != 0) {
      return c.Error("general.alignment must be a u32 power of two");
    }
    alignment = static_cast<uint64_t>(a->i);
  }

  file->tensors_.resize(num_tensors);
  std::vector<uint64_t> relative_offsets(num_tensors);
  for (uint64_t t = 0; t < num_tensors; ++t) {
    TensorInfo& info = file->tensors_[t];
    const std::string what = "tensor " + std::to_string(t);
    RETURN_IF_ERROR(c.String(&info.name, what + " name"));
    uint32_t num_dims = 0;
    RETURN_IF_ERROR(c.U32(&num_dims, info.name + " dimension count"));
    if (num_dims == 0 || num_dims > kMaxDims) {
      return c.Error("tensor " + info.name + " has " + std::to_string(num_dims) + " dimensions (1 to 4 allowed)");
    }
    uint64_t ne[kMaxDims] = {1, 1, 1, 1};
    uint64_t elems = 1;
    for (uint32_t d = 0; d < num_dims; ++d) {
      RETURN_IF_ERROR(c.U64(&ne[d], info.name + " dimension"));
      if (ne[d] == 0 || ne[d] > (uint64_t{1} << 62) || MulOverflows(elems, ne[d], &elems)) {
        return c.Error("tensor " + info.name + " has an invalid or overflowing shape");
      }
    }
    uint32_t type = 0;
    RETURN_IF_ERROR(c.U32(&type, info.name + " type"));
    if (!IsSupportedDType(type)) {
      // A type ggml defines is a valid file we cannot read yet; an id it does not define is corruption.
      if (const char* name = GgmlTypeName(type)) {
        return Unimplemented(c.path() + ": tensor " + info.name + " has type " + name + " (id " + std::to_string(type) +
                             "), which is not supported; supported: " + SupportedDTypeList());
      }
      return c.Error("tensor " + info.name + " has unknown type " + std::to_string(type));
    }
    info.type = static_cast<DType>(type);
    RETURN_IF_ERROR(c.U64(&relative_offsets[t], info.name + " offset"));
    if (relative_offsets[t] % alignment != 0) {
      return c.Error("tensor " + info.name + " offset " + std::to_string(relative_offsets[t]) +
                     " is not a multiple of the alignment " + std::to_string(alignment));
    }
    const uint64_t block = static_cast<uint64_t>(DTypeBlockElems(info.type));
    if (ne[0] % block != 0) {
      return c.Error("tensor " + info.name + " row of " + std::to_string(ne[0]) +
                     " elements is not a multiple of the quantisation block");
    }
    const uint64_t row_bytes = ne[0] / block * static_cast<uint64_t>(DTypeBlockBytes(info.type));
    if (MulOverflows(row_bytes, elems / ne[0], &info.nbytes)) {
      return c.Error("tensor " + info.name + " byte size overflows");
    }
    for (int d = static_cast<int>(num_dims) - 1; d >= 0; --d) info.shape.push_back(static_cast<int64_t>(ne[d]));
    if (!file->tensor_index_.emplace(info.name, t).second) return c.Error("duplicate tensor name " + info.name);
  }

  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  std::vector<size_t> order(num_tensors);
  for (size_t t = 0; t < num_tensors; ++t) {
    TensorInfo& info = file->tensors_[t];
    order[t] = t;
    uint64_t end = 0;
    if (__builtin_add_overflow(data_start, relative_offsets[t], &info.offset) ||
        __builtin_add_overflow(info.offset, info.nbytes, &end) || end > size) {
      return DataLoss(path + ": tensor " + info.name + " (" + std::to_string(info.nbytes) + " bytes at offset " +
                      std::to_string(relative_offsets[t]) + " of the data section) lies past the end of the file (" +
                      std::to_string(size) + " bytes)");
    }
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return file->tensors_[a].offset < file->tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = file->tensors_[order[k - 1]];
    const TensorInfo& cur = file->tensors_[order[k]];
    if (prev.offset + prev.nbytes > cur.offset) {
      return DataLoss(path + ": tensors " + prev.name + " and " + cur.name + " overlap");
    }
  }
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::Get(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Get(key);
  if (v == nullptr) return NotFound(path_ + ": no metadata " + key);
  if (v->type == Type::kString || v->type == Type::kArray || IsFloatType(v->type)) {
    return InvalidArgument(path_ + ": metadata " + key + " is not an integer");
  }
  return v->i;
}

StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Get(key);
  if (v == nullptr) return NotFound(path_ + ": no metadata " + key);
  if (v->type == Type::kString || v->type == Type::kArray || v->type == Type::kBool) {
    return InvalidArgument(path_ + ": metadata " + key + " is not a number");
  }
  return v->f;
}

StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Get(key);
  if (v == nullptr) return NotFound(path_ + ": no metadata " + key);
  if (v->type != Type::kString) return InvalidArgument(path_ + ": metadata " + key + " is not a string");
  return v->s;
}

const TensorInfo* GgufFile::Find(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> GgufFile::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

StatusOr<HostTensor> GgufFile::ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                         int64_t col_begin, int64_t col_end) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFound(path_ + ": no tensor " + name);
  return file_->ReadSlice(*info, row_begin, row_end, col_begin, col_end);
}

}  // namespace tpserve
