#include "model/gguf_writer.h"

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace tpserve {
namespace {

using Type = GgufValue::Type;
constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF"

GgufValue Scalar(Type t, int64_t i, double f) {
  GgufValue v;
  v.type = t;
  v.i = i;
  v.f = f;
  return v;
}

// Serialises a value (without its type tag) into `out`.
void AppendRaw(const void* p, size_t n, std::string* out) { out->append(static_cast<const char*>(p), n); }

void AppendString(const std::string& s, std::string* out) {
  const uint64_t n = s.size();
  AppendRaw(&n, 8, out);
  out->append(s);
}

void AppendScalar(Type t, int64_t i, double f, std::string* out) {
  auto put = [&](auto v) { AppendRaw(&v, sizeof(v), out); };
  switch (t) {
    case Type::kU8: put(static_cast<uint8_t>(i)); break;
    case Type::kI8: put(static_cast<int8_t>(i)); break;
    case Type::kBool: put(static_cast<uint8_t>(i != 0)); break;
    case Type::kU16: put(static_cast<uint16_t>(i)); break;
    case Type::kI16: put(static_cast<int16_t>(i)); break;
    case Type::kU32: put(static_cast<uint32_t>(i)); break;
    case Type::kI32: put(static_cast<int32_t>(i)); break;
    case Type::kU64: put(static_cast<uint64_t>(i)); break;
    case Type::kI64: put(static_cast<int64_t>(i)); break;
    case Type::kF32: put(static_cast<float>(f)); break;
    case Type::kF64: put(f); break;
    case Type::kString: case Type::kArray: CHECK(false) << "not a scalar";
  }
}

void AppendValue(const GgufValue& v, std::string* out) {
  const uint32_t type = static_cast<uint32_t>(v.type);
  AppendRaw(&type, 4, out);
  if (v.type == Type::kString) {
    AppendString(v.s, out);
    return;
  }
  if (v.type != Type::kArray) {
    AppendScalar(v.type, v.i, v.f, out);
    return;
  }
  CHECK(v.array_type != Type::kArray) << "nested GGUF arrays are not supported";
  const uint32_t et = static_cast<uint32_t>(v.array_type);
  AppendRaw(&et, 4, out);
  if (v.array_type == Type::kString) {
    const uint64_t n = v.strings.size();
    AppendRaw(&n, 8, out);
    for (const std::string& s : v.strings) AppendString(s, out);
  } else if (v.array_type == Type::kF32 || v.array_type == Type::kF64) {
    const uint64_t n = v.floats.size();
    AppendRaw(&n, 8, out);
    for (double f : v.floats) AppendScalar(v.array_type, 0, f, out);
  } else {
    const uint64_t n = v.ints.size();
    AppendRaw(&n, 8, out);
    for (int64_t i : v.ints) AppendScalar(v.array_type, i, 0, out);
  }
}

}  // namespace

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

void GgufWriter::set_version(uint32_t version) {
  CHECK(out_ == nullptr);
  CHECK(version == 2 || version == 3);
  version_ = version;
}

void GgufWriter::set_alignment(uint32_t alignment) {
  CHECK(out_ == nullptr);
  CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  alignment_ = alignment;
  if (alignment != 32) SetU32("general.alignment", alignment);
}

GgufValue& GgufWriter::Slot(const std::string& key) {
  CHECK(out_ == nullptr) << "metadata after Open";
  for (Entry& e : metadata_) {
    if (e.key == key) return e.value = GgufValue();
  }
  metadata_.push_back({key, GgufValue()});
  return metadata_.back().value;
}

void GgufWriter::SetU32(const std::string& key, uint32_t v) { Slot(key) = Scalar(Type::kU32, v, v); }
void GgufWriter::SetI32(const std::string& key, int32_t v) { Slot(key) = Scalar(Type::kI32, v, v); }
void GgufWriter::SetU64(const std::string& key, uint64_t v) {
  Slot(key) = Scalar(Type::kU64, static_cast<int64_t>(v), static_cast<double>(v));
}
void GgufWriter::SetF32(const std::string& key, float v) { Slot(key) = Scalar(Type::kF32, static_cast<int64_t>(v), v); }
void GgufWriter::SetBool(const std::string& key, bool v) { Slot(key) = Scalar(Type::kBool, v, v); }

void GgufWriter::SetString(const std::string& key, const std::string& v) {
  GgufValue& slot = Slot(key);
  slot.type = Type::kString;
  slot.s = v;
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  GgufValue& slot = Slot(key);
  slot.type = Type::kArray;
  slot.array_type = Type::kString;
  slot.strings = v;
}

void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& v) {
  GgufValue& slot = Slot(key);
  slot.type = Type::kArray;
  slot.array_type = Type::kF32;
  slot.floats.assign(v.begin(), v.end());
}

void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
  GgufValue& slot = Slot(key);
  slot.type = Type::kArray;
  slot.array_type = Type::kI32;
  slot.ints.assign(v.begin(), v.end());
}

void GgufWriter::SetValue(const std::string& key, const GgufValue& v) { Slot(key) = v; }

void GgufWriter::AddTensor(const std::string& name, DType type, const std::vector<int64_t>& shape) {
  CHECK(out_ == nullptr) << "tensor after Open";
  CHECK(!shape.empty() && shape.size() <= 4);
  for (const PendingTensor& t : tensors_) CHECK(t.name != name) << "duplicate tensor " << name;
  int64_t outer = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    CHECK_GT(shape[d], 0) << name;
    if (d + 1 < shape.size()) outer *= shape[d];
  }
  const uint64_t nbytes = static_cast<uint64_t>(outer) * DTypeRowBytes(type, shape.back());
  uint64_t offset = 0;
  if (!tensors_.empty()) {
    const PendingTensor& prev = tensors_.back();
    offset = (prev.offset + prev.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  tensors_.push_back({name, type, shape, nbytes, offset});
}

uint64_t GgufWriter::TensorBytes(size_t index) const {
  CHECK_LT(index, tensors_.size());
  return tensors_[index].nbytes;
}

Status GgufWriter::Write(const void* p, uint64_t n) {
  if (n > 0 && std::fwrite(p, 1, n, out_) != n) {
    return Internal("writing " + path_ + ": " + std::strerror(errno));
  }
  written_ += n;
  return OkStatus();
}

Status GgufWriter::Pad(uint64_t to_multiple) {
  static const char kZeros[256] = {};
  while (written_ % to_multiple != 0) {
    const uint64_t n = std::min<uint64_t>(sizeof(kZeros), to_multiple - written_ % to_multiple);
    RETURN_IF_ERROR(Write(kZeros, n));
  }
  return OkStatus();
}

Status GgufWriter::Open(const std::string& path) {
  CHECK(out_ == nullptr) << "Open twice";
  // The alignment applies to the recomputed offsets, in case set_alignment came after AddTensor.
  uint64_t offset = 0;
  for (PendingTensor& t : tensors_) {
    t.offset = (offset + alignment_ - 1) / alignment_ * alignment_;
    offset = t.offset + t.nbytes;
  }
  path_ = path;
  out_ = std::fopen(path.c_str(), "wb");
  if (out_ == nullptr) return InvalidArgument("cannot create " + path + ": " + std::strerror(errno));
  std::setvbuf(out_, nullptr, _IOFBF, 1 << 20);

  std::string header;
  const uint32_t magic = kGgufMagic;
  AppendRaw(&magic, 4, &header);
  AppendRaw(&version_, 4, &header);
  const uint64_t num_tensors = tensors_.size(), num_kv = metadata_.size();
  AppendRaw(&num_tensors, 8, &header);
  AppendRaw(&num_kv, 8, &header);
  for (const Entry& e : metadata_) {
    AppendString(e.key, &header);
    AppendValue(e.value, &header);
  }
  for (const PendingTensor& t : tensors_) {
    AppendString(t.name, &header);
    const uint32_t dims = static_cast<uint32_t>(t.shape.size());
    AppendRaw(&dims, 4, &header);
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {  // ggml order: innermost first
      const uint64_t ne = static_cast<uint64_t>(*it);
      AppendRaw(&ne, 8, &header);
    }
    const uint32_t type = static_cast<uint32_t>(t.type);
    AppendRaw(&type, 4, &header);
    AppendRaw(&t.offset, 8, &header);
  }
  RETURN_IF_ERROR(Write(header.data(), header.size()));
  RETURN_IF_ERROR(Pad(alignment_));
  data_start_ = written_;
  return OkStatus();
}

Status GgufWriter::WriteTensorData(const void* data, uint64_t n) {
  CHECK(out_ != nullptr) << "WriteTensorData before Open";
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (current_ >= tensors_.size()) return InvalidArgument(path_ + ": more tensor data than declared");
    const PendingTensor& t = tensors_[current_];
    if (current_done_ == 0) {
      RETURN_IF_ERROR(Pad(alignment_));
      CHECK_EQ(written_ - data_start_, t.offset);
    }
    const uint64_t take = std::min(n, t.nbytes - current_done_);
    RETURN_IF_ERROR(Write(p, take));
    p += take;
    n -= take;
    current_done_ += take;
    if (current_done_ == t.nbytes) {
      ++current_;
      current_done_ = 0;
    }
  }
  return OkStatus();
}

Status GgufWriter::WriteTensor(const HostTensor& t) {
  CHECK_LT(current_, tensors_.size());
  CHECK_EQ(current_done_, 0u);
  CHECK_EQ(static_cast<uint64_t>(t.nbytes()), tensors_[current_].nbytes) << tensors_[current_].name;
  CHECK(t.type == tensors_[current_].type) << tensors_[current_].name;
  return WriteTensorData(t.data.get(), static_cast<uint64_t>(t.nbytes()));
}

Status GgufWriter::Finish() {
  CHECK(out_ != nullptr) << "Finish before Open";
  if (current_ != tensors_.size()) {
    return FailedPrecondition(path_ + ": tensor " + tensors_[current_].name + " has no (or partial) data");
  }
  std::FILE* f = out_;
  out_ = nullptr;
  if (std::fclose(f) != 0) return Internal("closing " + path_ + ": " + std::strerror(errno));
  return OkStatus();
}

}  // namespace tpserve
