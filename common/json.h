// JsonValue and ParseJson: a strict JSON (RFC 8259) reader and writer for the files tpserve reads
// (config.json, tokenizer.json, safetensors headers) and writes (synthetic checkpoints). Parsing and
// serialisation are nlohmann-json's (Debian nlohmann-json3-dev); this adds the limits and checks
// below and a value type with ordered keys and O(log n) lookup that the model readers share.
//
// Strict means: no comments, no trailing commas, no NaN/Infinity, no leading zeros or '+', no raw
// control characters in strings, no lone UTF-16 surrogates, only valid UTF-8, no duplicate keys in
// one object, nothing but whitespace after the value. Nesting depth and input size are bounded, so
// hostile input cannot exhaust the stack or memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tpserve {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;  // null
  static JsonValue Bool(bool b);
  static JsonValue Number(double d);
  static JsonValue Int(int64_t i);
  static JsonValue String(std::string s);
  static JsonValue Array();
  static JsonValue Object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // A number written without fraction or exponent whose value fits int64 exactly.
  bool is_integer() const { return type_ == Type::kNumber && is_int_; }

  // REQUIRES: the matching is_*() (CHECKed).
  bool bool_value() const;
  double number() const;  // any number (integers converted)
  int64_t int_value() const;  // REQUIRES: is_integer()
  const std::string& string_value() const;

  // Arrays and objects: element count (0 for scalars). operator[] is the i-th element of an array
  // or the i-th value of an object (objects keep the file's key order); key(i) its key.
  size_t size() const { return items_.size(); }
  const JsonValue& operator[](size_t i) const;
  const std::string& key(size_t i) const;
  // The value of `key` in an object; nullptr if absent or if this is not an object. O(log n).
  const JsonValue* Find(std::string_view key) const;

  // Typed member lookups for config readers. NOT_FOUND if absent (or this is not an object),
  // INVALID_ARGUMENT naming the key if of another type.
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetNumber(std::string_view key) const;
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<bool> GetBool(std::string_view key) const;

  // Building. REQUIRES: is_array() / is_object(). Set replaces an existing key's value.
  void Append(JsonValue v);
  void Set(std::string key, JsonValue v);

  // Compact serialisation (no spaces); strings escaped so that ParseJson reads them back equal
  // (bytes that are not UTF-8 become U+FFFD). Non-integer numbers use the shortest form that
  // round-trips a double. REQUIRES: finite numbers.
  std::string Dump() const;

 private:
  friend class JsonBuilder;
  void BuildIndex();  // sorts index_ by key

  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  double number_ = 0;
  int64_t int_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;   // array elements or object values
  std::vector<std::string> keys_;  // object keys, parallel to items_
  std::vector<uint32_t> index_;    // object: positions sorted by key, for Find
};

struct JsonLimits {
  size_t max_bytes = size_t{1} << 30;  // input size
  int max_depth = 256;                 // nested arrays/objects
};

// Parses one JSON document. INVALID_ARGUMENT "json: line L column C: what" on any violation of
// the grammar or limits above.
StatusOr<JsonValue> ParseJson(std::string_view text, const JsonLimits& limits = {});

// Reads and parses a file. NOT_FOUND if it cannot be opened; DATA_LOSS "PATH: json: ..." if it does
// not parse.
StatusOr<JsonValue> ReadJsonFile(const std::string& path, const JsonLimits& limits = {});

}  // namespace tpserve
