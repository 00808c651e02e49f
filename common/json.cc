#include "common/json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tpserve {

JsonValue JsonValue::Bool(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::Number(double d) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = d;
  return v;
}

JsonValue JsonValue::Int(int64_t i) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.is_int_ = true;
  v.int_ = i;
  v.number_ = static_cast<double>(i);
  return v;
}

JsonValue JsonValue::String(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}

JsonValue JsonValue::Array() {
  JsonValue v;
  v.type_ = Type::kArray;
  return v;
}

JsonValue JsonValue::Object() {
  JsonValue v;
  v.type_ = Type::kObject;
  return v;
}

bool JsonValue::bool_value() const {
  CHECK(is_bool());
  return bool_;
}

double JsonValue::number() const {
  CHECK(is_number());
  return number_;
}

int64_t JsonValue::int_value() const {
  CHECK(is_integer());
  return int_;
}

const std::string& JsonValue::string_value() const {
  CHECK(is_string());
  return string_;
}

const JsonValue& JsonValue::operator[](size_t i) const {
  CHECK_LT(i, items_.size());
  return items_[i];
}

const std::string& JsonValue::key(size_t i) const {
  CHECK(is_object());
  CHECK_LT(i, keys_.size());
  return keys_[i];
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  auto it = std::lower_bound(index_.begin(), index_.end(), key,
                             [this](uint32_t pos, std::string_view k) { return keys_[pos] < k; });
  if (it == index_.end() || keys_[*it] != key) return nullptr;
  return &items_[*it];
}

StatusOr<int64_t> JsonValue::GetInt(std::string_view key) const {
  const JsonValue* v = Find(key);
  if (v == nullptr) return NotFound("json: no key \"" + std::string(key) + "\"");
  if (!v->is_integer()) return InvalidArgument("json: \"" + std::string(key) + "\" is not an integer");
  return v->int_;
}

StatusOr<double> JsonValue::GetNumber(std::string_view key) const {
  const JsonValue* v = Find(key);
  if (v == nullptr) return NotFound("json: no key \"" + std::string(key) + "\"");
  if (!v->is_number()) return InvalidArgument("json: \"" + std::string(key) + "\" is not a number");
  return v->number_;
}

StatusOr<std::string> JsonValue::GetString(std::string_view key) const {
  const JsonValue* v = Find(key);
  if (v == nullptr) return NotFound("json: no key \"" + std::string(key) + "\"");
  if (!v->is_string()) return InvalidArgument("json: \"" + std::string(key) + "\" is not a string");
  return v->string_;
}

StatusOr<bool> JsonValue::GetBool(std::string_view key) const {
  const JsonValue* v = Find(key);
  if (v == nullptr) return NotFound("json: no key \"" + std::string(key) + "\"");
  if (!v->is_bool()) return InvalidArgument("json: \"" + std::string(key) + "\" is not a bool");
  return v->bool_;
}

void JsonValue::Append(JsonValue v) {
  CHECK(is_array());
  items_.push_back(std::move(v));
}

void JsonValue::Set(std::string key, JsonValue v) {
  CHECK(is_object());
  auto it = std::lower_bound(index_.begin(), index_.end(), std::string_view(key),
                             [this](uint32_t pos, std::string_view k) { return keys_[pos] < k; });
  if (it != index_.end() && keys_[*it] == key) {
    items_[*it] = std::move(v);
    return;
  }
  const uint32_t pos = static_cast<uint32_t>(items_.size());
  index_.insert(it, pos);
  keys_.push_back(std::move(key));
  items_.push_back(std::move(v));
}

void JsonValue::BuildIndex() {
  index_.resize(keys_.size());
  for (size_t i = 0; i < index_.size(); ++i) index_[i] = static_cast<uint32_t>(i);
  std::sort(index_.begin(), index_.end(), [this](uint32_t a, uint32_t b) { return keys_[a] < keys_[b]; });
}

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson ToNlohmann(const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::kNull: return nullptr;
    case JsonValue::Type::kBool: return v.bool_value();
    case JsonValue::Type::kNumber:
      if (v.is_integer()) return v.int_value();
      CHECK(std::isfinite(v.number())) << "JSON cannot hold " << v.number();
      return v.number();
    case JsonValue::Type::kString: return v.string_value();
    case JsonValue::Type::kArray: {
      OrderedJson out = OrderedJson::array();
      for (size_t i = 0; i < v.size(); ++i) out.push_back(ToNlohmann(v[i]));
      return out;
    }
    case JsonValue::Type::kObject: {
      OrderedJson out = OrderedJson::object();
      for (size_t i = 0; i < v.size(); ++i) out.emplace(v.key(i), ToNlohmann(v[i]));
      return out;
    }
  }
  return nullptr;
}

}  // namespace

std::string JsonValue::Dump() const {
  // Compact; numbers in the shortest form that round-trips; invalid UTF-8 becomes U+FFFD rather
  // than invalid JSON.
  return ToNlohmann(*this).dump(-1, ' ', /*ensure_ascii=*/false, OrderedJson::error_handler_t::replace);
}

// Builds a JsonValue from nlohmann's SAX events (nlohmann checks the grammar, UTF-8, escapes and
// number syntax), adding what its parser does not enforce: the depth limit and unique keys. The
// value under construction is a stack of open arrays/objects, so depth costs no C++ stack.
class JsonBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonBuilder(std::string_view text, int max_depth) : text_(text), max_depth_(max_depth) {}

  bool null() override { return Add(JsonValue()); }
  bool boolean(bool b) override { return Add(JsonValue::Bool(b)); }
  bool number_integer(number_integer_t i) override { return Add(JsonValue::Int(i)); }
  bool number_unsigned(number_unsigned_t u) override {  // past int64: a double, not an integer
    return Add(u <= static_cast<uint64_t>(INT64_MAX) ? JsonValue::Int(static_cast<int64_t>(u))
                                                     : JsonValue::Number(static_cast<double>(u)));
  }
  bool number_float(number_float_t d, const string_t& /*text*/) override { return Add(JsonValue::Number(d)); }
  bool string(string_t& s) override { return Add(JsonValue::String(std::move(s))); }
  bool binary(binary_t& /*b*/) override { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t /*size*/) override { return Open(JsonValue::Object()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*size*/) override { return Open(JsonValue::Array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) override {
    // e.what(): "[json.exception.parse_error.101] parse error at line L, column C: what"; the
    // position is ours to format, as for every other json error.
    std::string what = e.what();
    const size_t column = what.find(", column ");
    const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return Fail(what, position);
  }

  StatusOr<JsonValue> Finish() {
    if (!status_.ok()) return status_;
    CHECK(is_done_) << "json: the parser ended without a value or an error";
    return std::move(root_);
  }

 private:
  bool Open(JsonValue container) {
    if (static_cast<int>(open_.size()) >= max_depth_) {
      return Fail("nesting deeper than " + std::to_string(max_depth_));
    }
    open_.push_back(OpenContainer{std::move(container), std::move(key_)});
    return true;
  }

  bool Close() {
    JsonValue done = std::move(open_.back().value);
    key_ = std::move(open_.back().key);
    open_.pop_back();
    if (done.is_object()) {
      done.BuildIndex();
      for (size_t i = 1; i < done.index_.size(); ++i) {
        const std::string& k = done.keys_[done.index_[i]];
        if (k == done.keys_[done.index_[i - 1]]) return Fail("duplicate key \"" + k + "\" in object");
      }
    }
    return Add(std::move(done));
  }

  bool Add(JsonValue v) {
    if (open_.empty()) {
      root_ = std::move(v);
      is_done_ = true;
      return true;
    }
    JsonValue& parent = open_.back().value;
    if (parent.is_object()) parent.keys_.push_back(std::move(key_));
    parent.items_.push_back(std::move(v));
    return true;
  }

  // position: bytes read when the error was seen, the offending one included (nlohmann's count);
  // 0 for errors found after the fact (depth, duplicates), which name no position.
  bool Fail(const std::string& what, size_t position = 0) {
    if (position == 0 || text_.empty()) {
      status_ = InvalidArgument("json: " + what);
      return false;
    }
    const size_t at = std::min(position, text_.size()) - 1;  // the offending byte
    const std::string_view before = text_.substr(0, at);
    const size_t newline = before.rfind('\n');
    const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    const size_t line = 1 + std::count(before.begin(), before.end(), '\n');
    status_ = InvalidArgument("json: line " + std::to_string(line) + " column " +
                              std::to_string(at - line_start + 1) + ": " + what);
    return false;
  }

  struct OpenContainer {
    JsonValue value;  // an array or object being filled
    std::string key;  // the key it will have in its parent object (if the parent is one)
  };

  std::string_view text_;
  int max_depth_;
  std::vector<OpenContainer> open_;
  std::string key_;  // the key of the next value in the innermost open object
  JsonValue root_;
  bool is_done_ = false;
  Status status_;
};

StatusOr<JsonValue> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return InvalidArgument("json: input of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                           std::to_string(limits.max_bytes));
  }
  JsonBuilder builder(text, limits.max_depth);
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                              /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {  // none expected from the SAX path; kept a Status
    return InvalidArgument(std::string("json: ") + e.what());
  }
  return builder.Finish();
}

StatusOr<JsonValue> ReadJsonFile(const std::string& path, const JsonLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return DataLoss(path + ": cannot read");
  if (static_cast<uint64_t>(size) > limits.max_bytes) {
    return DataLoss(path + ": json file of " + std::to_string(size) + " bytes exceeds the limit of " +
                    std::to_string(limits.max_bytes));
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return DataLoss(path + ": cannot read");
  StatusOr<JsonValue> v = ParseJson(text, limits);
  if (!v.ok()) return DataLoss(path + ": " + v.status().message());
  return v;
}

}  // namespace tpserve
