#include "common/json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>

namespace tpserve {
namespace {

JsonValue MustParse(std::string_view text) {
  StatusOr<JsonValue> v = ParseJson(text);
  EXPECT_TRUE(v.ok()) << text << " -> " << v.status().ToString();
  return v.ok() ? std::move(v).value() : JsonValue();
}

TEST(JsonTest, ParsesScalars) {
  EXPECT_TRUE(MustParse("null").is_null());
  EXPECT_TRUE(MustParse(" true ").bool_value());
  EXPECT_FALSE(MustParse("false").bool_value());
  EXPECT_EQ(MustParse("\"abc\"").string_value(), "abc");
  JsonValue i = MustParse("-9223372036854775808");
  ASSERT_TRUE(i.is_integer());
  EXPECT_EQ(i.int_value(), INT64_MIN);
  JsonValue big = MustParse("9223372036854775808");  // one past int64: a double, not an integer
  EXPECT_FALSE(big.is_integer());
  EXPECT_DOUBLE_EQ(big.number(), 9223372036854775808.0);
  EXPECT_DOUBLE_EQ(MustParse("1e-5").number(), 1e-5);
  EXPECT_DOUBLE_EQ(MustParse("-0.5E+2").number(), -50.0);
  EXPECT_DOUBLE_EQ(MustParse("500000.0").number(), 500000.0);
  EXPECT_FALSE(MustParse("500000.0").is_integer());
  EXPECT_EQ(MustParse("0").int_value(), 0);
}

TEST(JsonTest, ParsesNestedValuesInOrder) {
  JsonValue v = MustParse(R"({"b": [1, 2, {"x": null}], "a": {"k": "v"}, "c": 3.5})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.key(0), "b");
  EXPECT_EQ(v.key(1), "a");
  EXPECT_EQ(v.key(2), "c");
  const JsonValue* b = v.Find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[1].int_value(), 2);
  EXPECT_TRUE((*b)[2].Find("x")->is_null());
  EXPECT_EQ(v.Find("a")->Find("k")->string_value(), "v");
  EXPECT_EQ(v.Find("zz"), nullptr);
  EXPECT_EQ(*v.GetNumber("c"), 3.5);
  EXPECT_EQ(v.GetInt("c").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v.GetInt("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(v.GetString("a").status().code(), StatusCode::kInvalidArgument);
}

TEST(JsonTest, DecodesEscapesAndSurrogatePairs) {
  JsonValue v = MustParse(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20AC\ud83d\ude00")");
  EXPECT_EQ(v.string_value(), "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(MustParse("\"\xE2\x96\x81hi \xF0\x9F\x98\x80\"").string_value(), "\xE2\x96\x81hi \xF0\x9F\x98\x80");
}

TEST(JsonTest, RejectsMalformedInput) {
  const char* bad[] = {
      "",          "   ",        "nul",        "tru",       "[1,]",      "{\"a\":1,}", "[1 2]",
      "{\"a\" 1}", "{a:1}",      "01",         "-",         "1.",        ".5",         "1e",
      "+1",        "NaN",        "Infinity",   "1e999",     "\"abc",     "\"\\x\"",    "\"\\u12\"",
      "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"a\nb\"", "\"\xC3\"", "\"\xC0\xAF\"",
      "\"\xED\xA0\x80\"", "\"\xF5\x80\x80\x80\"", "[1] 2", "{\"a\":1,\"a\":2}", "[", "{", "// c\n1",
  };
  for (const char* text : bad) {
    StatusOr<JsonValue> v = ParseJson(text);
    EXPECT_FALSE(v.ok()) << "accepted: " << text;
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << text;
    }
  }
}

TEST(JsonTest, ErrorNamesLineAndColumn) {
  StatusOr<JsonValue> v = ParseJson("{\n  \"a\": [1,\n  x]\n}");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("line 3 column 3"), std::string::npos) << v.status().message();
}

TEST(JsonTest, DuplicateKeysAndDepthAreNamedInTheError) {
  StatusOr<JsonValue> dup = ParseJson(R"({"a": {"k": 1, "j": 2, "k": 3}})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate key \"k\""), std::string::npos) << dup.status().message();
  EXPECT_TRUE(ParseJson(R"({"a": {"k": 1}, "b": {"k": 1}})").ok());  // the same key in two objects
  StatusOr<JsonValue> deep = ParseJson(std::string(257, '[') + std::string(257, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nesting deeper than 256"), std::string::npos) << deep.status().message();
  EXPECT_TRUE(ParseJson(std::string(256, '[') + std::string(256, ']')).ok());
}

TEST(JsonTest, EnforcesDepthAndSizeLimits) {
  std::string deep(300, '[');
  deep += std::string(300, ']');
  EXPECT_FALSE(ParseJson(deep).ok());  // default depth limit 256
  JsonLimits limits;
  limits.max_depth = 400;
  EXPECT_TRUE(ParseJson(deep, limits).ok());
  // A hostile depth far past the limit fails without exhausting the stack.
  std::string very_deep(1 << 20, '[');
  EXPECT_FALSE(ParseJson(very_deep).ok());
  limits.max_bytes = 10;
  EXPECT_FALSE(ParseJson("[1,2,3,4,5,6]", limits).ok());
}

TEST(JsonTest, DumpRoundTripsRandomDocuments) {
  std::mt19937 rng(7);
  std::function<JsonValue(int)> make = [&](int depth) -> JsonValue {
    const int kind = depth > 3 ? rng() % 4 : rng() % 6;
    switch (kind) {
      case 0: return JsonValue();
      case 1: return JsonValue::Bool(rng() % 2);
      case 2: return rng() % 2 ? JsonValue::Int(static_cast<int64_t>(rng()) - (1ll << 31))
                               : JsonValue::Number(std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
      case 3: {
        std::string s;
        const int n = rng() % 8;
        for (int k = 0; k < n; ++k) {
          const char* pieces[] = {"a", "\"", "\\", "\n", "\x01", "\xC3\xA9", "\xF0\x9F\x98\x80", "/", " "};
          s += pieces[rng() % 9];
        }
        return JsonValue::String(s);
      }
      case 4: {
        JsonValue a = JsonValue::Array();
        const int n = rng() % 4;
        for (int k = 0; k < n; ++k) a.Append(make(depth + 1));
        return a;
      }
      default: {
        JsonValue o = JsonValue::Object();
        const int n = rng() % 4;
        for (int k = 0; k < n; ++k) {
          std::string key = "k";  // appended: GCC 12's -Wrestrict misfires on "k" + std::string
          key += std::to_string(rng() % 10);
          o.Set(std::move(key), make(depth + 1));
        }
        return o;
      }
    }
  };
  for (int trial = 0; trial < 200; ++trial) {
    JsonValue v = make(0);
    const std::string text = v.Dump();
    StatusOr<JsonValue> back = ParseJson(text);
    ASSERT_TRUE(back.ok()) << text << " " << back.status().ToString();
    EXPECT_EQ(back->Dump(), text);
  }
}

TEST(JsonTest, DumpIsCompactAndEscapes) {
  JsonValue o = JsonValue::Object();
  o.Set("z", JsonValue::Int(1));
  o.Set("a", JsonValue::String("q\"\x02"));
  JsonValue arr = JsonValue::Array();
  arr.Append(JsonValue::Number(0.5));
  arr.Append(JsonValue::Bool(true));
  arr.Append(JsonValue());
  o.Set("m", std::move(arr));
  o.Set("z", JsonValue::Int(2));  // replaces, keeps position
  EXPECT_EQ(o.Dump(), R"({"z":2,"a":"q\"\u0002","m":[0.5,true,null]})");
  EXPECT_EQ(o.Find("a")->string_value(), "q\"\x02");
  // Bytes that are not UTF-8 cannot be written as JSON: they become U+FFFD.
  EXPECT_EQ(JsonValue::String("a\xFF" "b").Dump(), "\"a\xEF\xBF\xBD" "b\"");
}

TEST(JsonTest, ReadJsonFileReportsPath) {
  const std::string path = ::testing::TempDir() + "/json_test_bad.json";
  {
    std::ofstream out(path);
    out << "{\"a\": }";
  }
  StatusOr<JsonValue> v = ReadJsonFile(path);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(v.status().message().find(path), std::string::npos);
  EXPECT_EQ(ReadJsonFile(path + ".missing").status().code(), StatusCode::kNotFound);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tpserve
