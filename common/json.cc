#include "common/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/utf8.h"

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

void AppendJsonString(std::string_view s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

void JsonValue::DumpTo(std::string* out) const {
  switch (type_) {
    case Type::kNull: out->append("null"); break;
    case Type::kBool: out->append(bool_ ? "true" : "false"); break;
    case Type::kNumber: {
      char buf[64];
      std::to_chars_result r;
      if (is_int_) {
        r = std::to_chars(buf, buf + sizeof(buf), int_);
      } else {
        CHECK(std::isfinite(number_)) << "JSON cannot hold " << number_;
        r = std::to_chars(buf, buf + sizeof(buf), number_);
      }
      out->append(buf, r.ptr);
      break;
    }
    case Type::kString: AppendJsonString(string_, out); break;
    case Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out->push_back(',');
        items_[i].DumpTo(out);
      }
      out->push_back(']');
      break;
    case Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJsonString(keys_[i], out);
        out->push_back(':');
        items_[i].DumpTo(out);
      }
      out->push_back('}');
      break;
  }
}

std::string JsonValue::Dump() const {
  std::string out;
  DumpTo(&out);
  return out;
}

// Recursive descent; depth bounded by JsonLimits::max_depth.
class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  StatusOr<JsonValue> ParseDocument() {
    if (text_.size() > limits_.max_bytes) {
      return InvalidArgument("json: input of " + std::to_string(text_.size()) + " bytes exceeds the limit of " +
                             std::to_string(limits_.max_bytes));
    }
    JsonValue v;
    SkipSpace();
    RETURN_IF_ERROR(ParseValue(&v, 0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected data after the value");
    return v;
  }

 private:
  Status Error(const std::string& what) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return InvalidArgument("json: line " + std::to_string(line) + " column " +
                           std::to_string(pos_ - line_start + 1) + ": " + what);
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) ++pos_;
  }

  Status ParseValue(JsonValue* out, int depth) {
    if (AtEnd()) return Error("unexpected end of input");
    switch (Peek()) {
      case '{': return ParseObject(out, depth + 1);
      case '[': return ParseArray(out, depth + 1);
      case '"':
        out->type_ = JsonValue::Type::kString;
        return ParseString(&out->string_);
      case 't': return ParseLiteral("true", out, JsonValue::Bool(true));
      case 'f': return ParseLiteral("false", out, JsonValue::Bool(false));
      case 'n': return ParseLiteral("null", out, JsonValue());
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return ParseNumber(out);
        return Error(std::string("unexpected character '") + Peek() + "'");
    }
  }

  Status ParseLiteral(std::string_view word, JsonValue* out, JsonValue value) {
    if (text_.substr(pos_, word.size()) != word) return Error("invalid literal");
    pos_ += word.size();
    *out = std::move(value);
    return OkStatus();
  }

  Status ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t b = pos_;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - b;
    };
    if (Peek() == '-') ++pos_;
    if (AtEnd()) return Error("truncated number");
    if (Peek() == '0') {
      ++pos_;
      if (!AtEnd() && Peek() >= '0' && Peek() <= '9') return Error("leading zero in number");
    } else if (digits() == 0) {
      return Error("invalid number");
    }
    bool is_int = true;
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      is_int = false;
      if (digits() == 0) return Error("digits expected after '.'");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      is_int = false;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Error("digits expected in exponent");
    }
    const char* b = text_.data() + start;
    const char* e = text_.data() + pos_;
    out->type_ = JsonValue::Type::kNumber;
    if (is_int) {
      int64_t i = 0;
      auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) {
        out->is_int_ = true;
        out->int_ = i;
        out->number_ = static_cast<double>(i);
        return OkStatus();
      }
    }
    double d = 0;
    auto r = std::from_chars(b, e, d);
    if (r.ptr != e || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
      return Error("invalid number");
    }
    if (r.ec == std::errc::result_out_of_range || !std::isfinite(d)) return Error("number out of range");
    out->number_ = d;
    return OkStatus();
  }

  StatusOr<uint32_t> ParseHex4() {
    if (text_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return Error("invalid hex digit in \\u escape");
    }
    return v;
  }



  // Length of the valid UTF-8 sequence at pos_ (lead byte >= 0x80), 0 if invalid (overlong forms,
  // surrogates and code points past U+10FFFF are invalid).
  size_t Utf8SequenceLength() const {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text_[pos_ + k]); };
    const unsigned char c = byte(0);
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (text_.size() - pos_ < n) return 0;
    for (size_t k = 1; k < n; ++k) {
      if ((byte(k) & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (byte(k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return n;
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(Peek());
      if (c == '"') {
        ++pos_;
        return OkStatus();
      }
      if (c < 0x20) return Error("raw control character in string");
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength();
        if (n == 0) return Error("invalid UTF-8 in string");
        out->append(text_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        // Copy the run of plain characters at once.
        size_t end = pos_;
        while (end < text_.size()) {
          const unsigned char d = static_cast<unsigned char>(text_[end]);
          if (d == '"' || d == '\\' || d < 0x20 || d >= 0x80) break;
          ++end;
        }
        out->append(text_.data() + pos_, end - pos_);
        pos_ = end;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          ASSIGN_OR_RETURN(uint32_t cp, ParseHex4());
          if (cp >= 0xDC00 && cp <= 0xDFFF) return Error("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") return Error("high surrogate without a low surrogate");
            pos_ += 2;
            ASSIGN_OR_RETURN(uint32_t lo, ParseHex4());
            if (lo < 0xDC00 || lo > 0xDFFF) return Error("high surrogate without a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          --pos_;
          return Error(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Status ParseArray(JsonValue* out, int depth) {
    if (depth > limits_.max_depth) return Error("nesting deeper than " + std::to_string(limits_.max_depth));
    ++pos_;
    *out = JsonValue::Array();
    SkipSpace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return OkStatus();
    }
    while (true) {
      SkipSpace();
      JsonValue item;
      RETURN_IF_ERROR(ParseValue(&item, depth));
      out->items_.push_back(std::move(item));
      SkipSpace();
      if (AtEnd()) return Error("unterminated array");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return OkStatus();
      }
      return Error("',' or ']' expected");
    }
  }

  Status ParseObject(JsonValue* out, int depth) {
    if (depth > limits_.max_depth) return Error("nesting deeper than " + std::to_string(limits_.max_depth));
    ++pos_;
    *out = JsonValue::Object();
    SkipSpace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return OkStatus();
    }
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() != '"') return Error("string key expected");
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (AtEnd() || Peek() != ':') return Error("':' expected");
      ++pos_;
      SkipSpace();
      JsonValue item;
      RETURN_IF_ERROR(ParseValue(&item, depth));
      out->keys_.push_back(std::move(key));
      out->items_.push_back(std::move(item));
      SkipSpace();
      if (AtEnd()) return Error("unterminated object");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      return Error("',' or '}' expected");
    }
    out->BuildIndex();
    for (size_t i = 1; i < out->index_.size(); ++i) {
      if (out->keys_[out->index_[i]] == out->keys_[out->index_[i - 1]]) {
        return Error("duplicate key \"" + out->keys_[out->index_[i]] + "\" in object");
      }
    }
    return OkStatus();
  }

  std::string_view text_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
};

StatusOr<JsonValue> ParseJson(std::string_view text, const JsonLimits& limits) {
  return JsonParser(text, limits).ParseDocument();
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
