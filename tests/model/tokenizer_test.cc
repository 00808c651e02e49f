// Tokenizer tests: exact ids against HF `tokenizers` (tests/data/tokenizer_golden.txt, recorded by
// scripts/gen_tokenizer_golden.py) on SmolLM2's vocabulary with its own, the GPT-2 and the Llama 3
// pre-tokenizers and on a tiny HF tokenizer.json; round trips; special tokens; a SentencePiece-style
// vocabulary made by hand.
#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "model/bpe_tokenizer.h"
#include "model/chat_format.h"
#include "model/gguf_writer.h"
#include "model/pretokenizer.h"
#include "model/unicode.h"
#include "tests/model/tokenizer_test_util.h"

namespace tpserve {
namespace {

using testing_tokenizer::Corpus;
using testing_tokenizer::GoldenCase;
using testing_tokenizer::ReadGolden;

std::unique_ptr<Tokenizer> WithPreTokenizer(const Tokenizer& base, const std::string& pre, bool ignore_merges) {
  TokenizerVocab vocab = base.vocab();
  vocab.pre = pre;
  vocab.ignore_merges = ignore_merges;
  auto tok = Tokenizer::FromVocab(std::move(vocab));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

void ExpectGolden(const Tokenizer& tok, const std::string& variant) {
  int num_cases = 0;
  for (const GoldenCase& c : ReadGolden()) {
    if (c.variant != variant) continue;
    ++num_cases;
    EXPECT_EQ(tok.Encode(c.text, /*add_bos=*/false), c.ids) << variant << ": \"" << c.text << "\"";
    EXPECT_EQ(tok.Decode(c.ids), c.decoded) << variant;
  }
  EXPECT_GE(num_cases, 30) << variant;
}

TEST(TokenizerTest, SmolLmMetadata) {
  REQUIRE_SMOLLM(tok);
  EXPECT_EQ(tok->model(), TokenizerModel::kBpe);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->eot_id(), 2);  // <|im_end|>
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->TokenPiece(1), "<|im_start|>");
  EXPECT_EQ(tok->TokenId("<|im_end|>"), 2);
  EXPECT_EQ(tok->TokenId("Ġthe"), tok->Encode(" the", false).at(0));
  EXPECT_FALSE(tok->TokenId("no such piece").has_value());
  EXPECT_TRUE(tok->IsSpecial(0));
  EXPECT_TRUE(tok->IsSpecial(16));
  EXPECT_FALSE(tok->IsSpecial(17));
  EXPECT_NE(tok->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(static_cast<const BpeTokenizer*>(tok)->pre_tokenizer(), PreTokenizerKind::kSmolLM);
}

TEST(TokenizerTest, SmolLmMatchesHfTokenizers) {
  REQUIRE_SMOLLM(tok);
  ExpectGolden(*tok, "smollm");
}

TEST(TokenizerTest, Gpt2PreTokenizerMatchesHfTokenizers) {
  REQUIRE_SMOLLM(tok);
  ExpectGolden(*WithPreTokenizer(*tok, "gpt2", false), "gpt2");
}

TEST(TokenizerTest, Llama3PreTokenizerMatchesHfTokenizers) {
  REQUIRE_SMOLLM(tok);
  ExpectGolden(*WithPreTokenizer(*tok, "llama3", true), "llama3");
}

TEST(TokenizerTest, Qwen2PreTokenizerMatchesHfTokenizers) {
  REQUIRE_SMOLLM(tok);
  ExpectGolden(*WithPreTokenizer(*tok, "qwen2", false), "qwen2");
}

TEST(TokenizerTest, HfDirMatchesHfTokenizers) {
  auto tok = Tokenizer::FromHfDir(testing_tokenizer::kHfTinyDir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), 0);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ(static_cast<const BpeTokenizer*>(tok->get())->pre_tokenizer(), PreTokenizerKind::kLlama3);
  ExpectGolden(**tok, "hf_tiny");
  EXPECT_EQ((*tok)->Encode("hi", /*add_bos=*/true).front(), 0);
}

TEST(TokenizerTest, HfDirSentencePieceStyleMatchesHfTokenizers) {
  auto tok = Tokenizer::FromHfDir(testing_tokenizer::kHfSpmTinyDir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kSpm);
  EXPECT_TRUE((*tok)->strips_leading_space());
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_EQ((*tok)->token_type(0), TokenType::kUnknown);
  EXPECT_EQ((*tok)->token_type(3 + 'A'), TokenType::kByte);
  ExpectGolden(**tok, "hf_spm_tiny");
}

// Gemma's layout: no space prepended, <start_of_turn>/<end_of_turn> special tokens, byte fallback.
TEST(TokenizerTest, HfDirGemmaStyleMatchesHfTokenizers) {
  auto tok = Tokenizer::FromHfDir(testing_tokenizer::kHfGemmaTinyDir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kSpm);
  EXPECT_FALSE((*tok)->strips_leading_space());
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_EQ((*tok)->TokenId("<start_of_turn>"), 4);
  ExpectGolden(**tok, "hf_gemma_tiny");
  EXPECT_EQ((*tok)->Encode("<start_of_turn>user\n", /*add_bos=*/true),
            (std::vector<int32_t>{2, 4, *(*tok)->TokenId("user"), *(*tok)->TokenId("\n")}));
}

// Gemma 3's own vocabulary (262k pieces, byte fallback, no prefix space, user-defined newline runs and
// HTML tags) against HF's tokenizers run on it (scripts/gen_tokenizer_golden.py), and its chat turns.
TEST(TokenizerTest, Gemma3MatchesHfTokenizers) {
  auto file = GgufFile::Open(testing_tokenizer::kGemma3Path);
  if (file.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "no " << testing_tokenizer::kGemma3Path << " (run scripts/fetch-model.sh gemma3)";
  }
  if (file.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << file.status().ToString() << " (this build lacks the file's weight types)";
  }
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kSpm);
  EXPECT_EQ((*tok)->vocab_size(), 262144);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_FALSE((*tok)->strips_leading_space());
  ExpectGolden(**tok, "gemma3");
  const std::string prompt = RenderChat(ChatFormat::kGemma, {{"user", "Hi"}}, /*add_generation_prompt=*/true);
  const std::vector<int32_t> ids = (*tok)->Encode(prompt, /*add_bos=*/false);
  EXPECT_EQ(ids.front(), 2);  // <bos>, written by the format
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *(*tok)->TokenId("<start_of_turn>")), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *(*tok)->TokenId("<end_of_turn>")), 1);
  EXPECT_EQ((*tok)->Decode(ids), prompt);
}

TEST(TokenizerTest, HfDirErrors) {
  EXPECT_EQ(Tokenizer::FromHfDir("/nonexistent/dir").status().code(), StatusCode::kNotFound);
}

TEST(TokenizerTest, SpecialTokensAreSingleIds) {
  REQUIRE_SMOLLM(tok);
  EXPECT_EQ(tok->Encode("<|im_start|>", false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok->Encode("<|im_end|><|endoftext|>", false), (std::vector<int32_t>{2, 0}));
  const std::vector<int32_t> ids = tok->Encode("<|im_start|>user\nHi<|im_end|>", false);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 1);
  // Not parsed: plain text, decoding back to the same characters.
  const std::vector<int32_t> plain = tok->Encode("<|im_start|>", false, /*parse_special=*/false);
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_FALSE(tok->IsSpecial(id));
  EXPECT_EQ(tok->Decode(plain), "<|im_start|>");
  // BOS only when asked.
  EXPECT_EQ(tok->Encode("hi", true).front(), 1);
  EXPECT_NE(tok->Encode("hi", false).front(), 1);
}

TEST(TokenizerTest, RoundTripOverCorpusAndRandomText) {
  REQUIRE_SMOLLM(tok);
  for (const std::string& text : Corpus()) {
    EXPECT_EQ(tok->Decode(tok->Encode(text, false)), text);
    EXPECT_EQ(tok->Decode(tok->Encode(text, false, false)), text);
  }
  // Random strings over a mixed alphabet: byte-level BPE is lossless.
  const std::vector<std::string> alphabet = {"a", "Z", " ", "  ", "\n", "\t", "7", "'", "s", "é", "ß", "中", "文",
                                             "😀", "🏽", "\u200d", "!", "(", "_", "\r\n", "ℵ", "١"};
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(tok->Decode(tok->Encode(text, false)), text) << text;
  }
}

TEST(TokenizerTest, InvalidUtf8IsEncodedBytewise) {
  REQUIRE_SMOLLM(tok);
  // SmolLM2 lacks tokens for a few bytes (never in UTF-8: C0, C1, F5..FF; rare: 04, 06, 14, F1, ...):
  // those are dropped, as llama.cpp and HF tokenizers do (the file's "unknown" id 0 is
  // <|endoftext|>: emitting it would end the text). Every other byte round-trips.
  std::vector<char> bytes_with_token;
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    unicode::AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &symbol);
    const bool never_in_utf8 = b == 0xC0 || b == 0xC1 || b >= 0xF5;
    if (never_in_utf8) {
      EXPECT_FALSE(tok->TokenId(symbol).has_value()) << b;
    }
    if (tok->TokenId(symbol)) bytes_with_token.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(bytes_with_token.size(), 256u - 21u);
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) bytes.push_back(bytes_with_token[rng() % bytes_with_token.size()]);
    std::string concat;
    for (int32_t id : tok->Encode(bytes, false, false)) concat += tok->TokenText(id);
    ASSERT_EQ(concat, bytes);
    EXPECT_EQ(tok->Decode(tok->Encode(bytes, false, false)), unicode::SanitizeUtf8(bytes));
  }
  EXPECT_EQ(tok->Decode(tok->Encode("a\xF0" "b", false)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(tok->Encode("a\xFF", false), tok->Encode("a", false));
  // U+0014 is valid UTF-8 without a piece (found by tests/fuzz/tokenizer_fuzz); HF tokenizers 0.23
  // on the same vocabulary and merges: [81, 82].
  EXPECT_EQ(tok->Encode("a\x14" "b", false), (std::vector<int32_t>{81, 82}));
}

TEST(TokenizerTest, DecodeSkipsOutOfRangeIds) {
  REQUIRE_SMOLLM(tok);
  const std::vector<int32_t> hello = tok->Encode("hello", false);
  std::vector<int32_t> ids = {-5};
  ids.insert(ids.end(), hello.begin(), hello.end());
  ids.push_back(1 << 30);
  EXPECT_EQ(tok->Decode(ids), "hello");
  EXPECT_EQ(tok->TokenText(-1), "");
}

TEST(PreTokenizerTest, SplitsLikeTheRegexes) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "Hello  world"), (V{"Hello", " ", " world"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "x   \n  y"), (V{"x", "   \n ", " y"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "it's 2024!"), (V{"it", "'s", " 2024", "!"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kSmolLM, "it's 2024!"), (V{"it", "'s", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kLlama3, "it's 2024!"), (V{"it", "'s", " ", "202", "4", "!"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kQwen2, "it's 2024!"), (V{"it", "'s", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kLlama3, "a\n\nb"), (V{"a", "\n\n", "b"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kLlama3, "x   \n  y"), (V{"x", "   \n", " ", " y"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kLlama3, "I'VE seen 12345 cats\r\n\r\n ok"),
            (V{"I", "'VE", " seen", " ", "123", "45", " cats", "\r\n\r\n", " ok"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "I'VE"), (V{"I", "'", "VE"}));
  EXPECT_TRUE(PreTokenize(PreTokenizerKind::kGpt2, "").empty());
  EXPECT_FALSE(PreTokenizerFromName("no-such-pre").has_value());
}

TEST(UnicodeTest, Classes) {
  EXPECT_TRUE(unicode::IsLetter('a'));
  EXPECT_TRUE(unicode::IsLetter(U'é'));
  EXPECT_TRUE(unicode::IsLetter(U'中'));
  EXPECT_TRUE(unicode::IsNumber('7'));
  EXPECT_TRUE(unicode::IsNumber(U'½'));
  EXPECT_TRUE(unicode::IsNumber(U'Ⅻ'));
  EXPECT_TRUE(unicode::IsWhitespace(U'\u3000'));
  EXPECT_TRUE(unicode::IsWhitespace(U'\u0085'));
  EXPECT_FALSE(unicode::IsWhitespace(U'\u200b'));
  EXPECT_TRUE(unicode::IsPunctuation('!'));
  EXPECT_TRUE(unicode::IsSymbol(U'😀'));
  EXPECT_TRUE(unicode::IsMark(U'\u0301'));
  EXPECT_EQ(unicode::ClassFlags(0x10FFFF), 0);
}

TEST(UnicodeTest, SanitizeReplacesMaximalSubparts) {
  // Expected values as Python's bytes.decode("utf-8", "replace") gives them.
  const std::string r(unicode::kReplacementCharacter);
  EXPECT_EQ(unicode::SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(unicode::SanitizeUtf8("\xC3"), r);
  EXPECT_EQ(unicode::SanitizeUtf8("\xE0\x80"), r + r);
  EXPECT_EQ(unicode::SanitizeUtf8("\xF0\x9F\x98" "A"), r + "A");
  EXPECT_EQ(unicode::SanitizeUtf8("\xC0\xAF"), r + r);
  EXPECT_EQ(unicode::SanitizeUtf8("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(unicode::SanitizeUtf8("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(unicode::SanitizeUtf8("\xE2\x82\xE2\x82\xAC"), r + "\xE2\x82\xAC");
  EXPECT_TRUE(unicode::IsValidUtf8("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(unicode::IsValidUtf8("\xF0\x9F\x98"));
}

// A SentencePiece-style vocabulary made by hand: scores decide the merge order, <0xNN> byte
// fallback covers characters with no piece, a space prefix goes before the text.
TokenizerVocab HandMadeSpmVocab() {
  TokenizerVocab v;
  v.model = TokenizerModel::kSpm;
  v.add_space_prefix = true;
  auto add = [&](const std::string& piece, float score, TokenType type = TokenType::kNormal) {
    v.pieces.push_back(piece);
    v.scores.push_back(score);
    v.types.push_back(type);
    return static_cast<int32_t>(v.pieces.size() - 1);
  };
  v.unk_id = add("<unk>", 0, TokenType::kUnknown);
  v.bos_id = add("<s>", 0, TokenType::kControl);
  v.eos_id = add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    add(piece, 0, TokenType::kByte);  // ids 3..258
  }
  // ids from 259 on
  for (const char* c : {"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "a", "b"}) add(c, -10);
  add("\xE2\x96\x81h", -1);        // 269 ▁h
  add("el", -2);                   // 270
  add("ll", -0.5);                 // 271: beats "el"
  add("lo", -3);                   // 272
  add("\xE2\x96\x81hello", -4);    // 273
  add("ell", -0.7);                // 274
  add("\xE2\x96\x81hell", -0.8);   // 275
  add("\xE2\x96\x81hellow", -9);   // 276
  add("ab", -1);                   // 277
  add("ba", -1);                   // 278
  return v;
}

TEST(SpmTokenizerTest, ScoresByteFallbackAndSpacePrefix) {
  auto made = Tokenizer::FromVocab(HandMadeSpmVocab());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const Tokenizer& tok = **made;
  EXPECT_EQ(tok.model(), TokenizerModel::kSpm);
  EXPECT_EQ(tok.eot_id(), tok.eos_id());
  // "▁hello": ll (-0.5) first, then ell (-0.7), then ▁h (-1), then ▁h+ell=▁hell (-0.8), then +o:
  // "▁hello" (-4). Leftmost among equal scores: "abab" -> ab, ab (not a, ba, b).
  EXPECT_EQ(tok.Encode("hello", false), (std::vector<int32_t>{273}));
  EXPECT_EQ(tok.Encode("hello", true), (std::vector<int32_t>{1, 273}));
  EXPECT_EQ(tok.Encode("abab", false), (std::vector<int32_t>{259, 277, 277}));
  // é has no piece: its two UTF-8 bytes as byte tokens (<0xC3> = 3 + 0xC3, <0xA9> = 3 + 0xA9).
  EXPECT_EQ(tok.Encode("h\xC3\xA9", false), (std::vector<int32_t>{269, 3 + 0xC3, 3 + 0xA9}));
  // The space prefix also follows a control token written in the text.
  EXPECT_EQ(tok.Encode("a</s>a", false), (std::vector<int32_t>{259, 267, 2, 259, 267}));
  EXPECT_EQ(tok.Encode("a</s>a", false, false).size(), 7u);  // "▁a</s>a": ▁, a, 4 byte tokens, a
  // Decode: ▁ -> space, bytes reassembled, the first token's leading space dropped.
  EXPECT_EQ(tok.Decode(tok.Encode("hello  world h\xC3\xA9", false)), "hello  world h\xC3\xA9");
  EXPECT_EQ(tok.Decode({273, 273}), "hello hello");
  EXPECT_EQ(tok.Decode({1, 273}), "<s> hello");  // as llama.cpp: only the first token is stripped
  EXPECT_EQ(tok.TokenText(3 + 0x41), "A");
  EXPECT_EQ(tok.TokenText(273), " hello");
  EXPECT_TRUE(tok.IsSpecial(0));
  EXPECT_TRUE(tok.IsSpecial(1));
  EXPECT_FALSE(tok.IsSpecial(273));
}

TEST(SpmTokenizerTest, UnknownWithoutByteTokens) {
  TokenizerVocab v;
  v.model = TokenizerModel::kSpm;
  v.pieces = {"<unk>", "\xE2\x96\x81", "a"};
  v.types = {TokenType::kUnknown, TokenType::kNormal, TokenType::kNormal};
  v.unk_id = 0;
  auto tok = Tokenizer::FromVocab(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->Encode("a\xC3\xA9" "a", false), (std::vector<int32_t>{2, 0, 2}));
}

// Writes a GGUF holding only tokenizer metadata: `edit` may change the writer before it is saved.
std::string WriteTokenizerGguf(const std::string& name, const TokenizerVocab& v,
                               const std::function<void(GgufWriter&)>& edit) {
  const std::string path = ::testing::TempDir() + "/tpserve_tokenizer_" + name + ".gguf";
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", v.pieces);
  w.SetF32Array("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int32_t>(t));
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.unknown_token_id", v.unk_id);
  w.SetU32("tokenizer.ggml.bos_token_id", v.bos_id);
  w.SetU32("tokenizer.ggml.eos_token_id", v.eos_id);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  edit(w);
  EXPECT_TRUE(w.Open(path).ok());
  EXPECT_TRUE(w.Finish().ok());
  return path;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

TEST(SpmTokenizerTest, FromGgufEqualsFromVocab) {
  const TokenizerVocab v = HandMadeSpmVocab();
  auto from_gguf = LoadGgufTokenizer(WriteTokenizerGguf("spm", v, [](GgufWriter&) {}));
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().ToString();
  auto from_vocab = Tokenizer::FromVocab(v);
  ASSERT_TRUE(from_vocab.ok());
  const Tokenizer& a = **from_gguf;
  const Tokenizer& b = **from_vocab;
  EXPECT_EQ(a.model(), TokenizerModel::kSpm);
  EXPECT_TRUE(a.strips_leading_space());  // add_space_prefix defaults to true for "llama"
  EXPECT_TRUE(a.add_bos());
  EXPECT_EQ(a.bos_id(), 1);
  for (const char* text : {"hello world", "abab  ba", "h\xC3\xA9llo</s>hello", ""}) {
    EXPECT_EQ(a.Encode(text, true), b.Encode(text, true)) << text;
    EXPECT_EQ(a.Decode(a.Encode(text, false)), b.Decode(b.Encode(text, false)));
  }
}

// The Gemma-style vocabulary in a GGUF with add_space_prefix = false (as llama.cpp writes Gemma's):
// the same ids as HF's tokenizers.
TEST(SpmTokenizerTest, GemmaStyleFromGgufMatchesHfTokenizers) {
  auto hf = Tokenizer::FromHfDir(testing_tokenizer::kHfGemmaTinyDir);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  auto tok = LoadGgufTokenizer(WriteTokenizerGguf(
      "gemma", (*hf)->vocab(), [](GgufWriter& w) { w.SetBool("tokenizer.ggml.add_space_prefix", false); }));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_FALSE((*tok)->strips_leading_space());
  ExpectGolden(**tok, "hf_gemma_tiny");
}

// Phi-3: whitespace after its turn markers is dropped (llama.cpp's rule, keyed on general.name as it keys
// it; HF marks those added tokens rstrip), but not after <s> or <|endoftext|>, nor for other models.
TEST(SpmTokenizerTest, Phi3SpecialTokensStripTheWhitespaceAfterThem) {
  TokenizerVocab v = HandMadeSpmVocab();
  for (const char* piece : {"<|user|>", "<|end|>", "<|endoftext|>"}) {
    v.pieces.push_back(piece);
    v.types.push_back(TokenType::kControl);
    v.scores.push_back(0);
  }
  const int32_t user = static_cast<int32_t>(v.pieces.size()) - 3, end = user + 1, eot = user + 2;
  auto phi3 = LoadGgufTokenizer(
      WriteTokenizerGguf("phi3", v, [](GgufWriter& w) { w.SetString("general.name", "Phi-3-mini-4k-instruct"); }));
  auto other =
      LoadGgufTokenizer(WriteTokenizerGguf("other", v, [](GgufWriter& w) { w.SetString("general.name", "x"); }));
  ASSERT_TRUE(phi3.ok() && other.ok());
  const std::string text = "<|user|>\n hello<|end|>\n<|endoftext|> hello";
  const std::vector<int32_t> stripped = (*phi3)->Encode(text, false);
  const std::vector<int32_t> kept = (*other)->Encode(text, false);
  // <|user|> then "hello" as if the text started there; <|end|> directly followed by <|endoftext|>, whose
  // following space stays.
  std::vector<int32_t> want = {user};
  for (int32_t id : (*phi3)->Encode("hello", false)) want.push_back(id);
  want.push_back(end);
  want.push_back(eot);
  for (int32_t id : (*phi3)->Encode(" hello", false)) want.push_back(id);
  EXPECT_EQ(stripped, want);
  EXPECT_GT(kept.size(), stripped.size());  // another model keeps the newlines and the space
}

TEST(TokenizerTest, FromGgufErrors) {
  const TokenizerVocab v = HandMadeSpmVocab();
  auto code = [&](const std::string& name, const std::function<void(GgufWriter&)>& edit) {
    return LoadGgufTokenizer(WriteTokenizerGguf(name, v, edit)).status().code();
  };
  EXPECT_EQ(code("bert", [](GgufWriter& w) { w.SetString("tokenizer.ggml.model", "bert"); }),
            StatusCode::kUnimplemented);
  EXPECT_EQ(code("types", [](GgufWriter& w) { w.SetI32Array("tokenizer.ggml.token_type", {1, 1}); }),
            StatusCode::kDataLoss);
  EXPECT_EQ(code("scores", [](GgufWriter& w) { w.SetF32Array("tokenizer.ggml.scores", {0.5f}); }),
            StatusCode::kDataLoss);
  EXPECT_EQ(code("bos", [](GgufWriter& w) { w.SetU32("tokenizer.ggml.bos_token_id", 100000); }),
            StatusCode::kDataLoss);
  EXPECT_EQ(code("tokens", [](GgufWriter& w) { w.SetString("tokenizer.ggml.tokens", "not an array"); }),
            StatusCode::kDataLoss);
  EXPECT_EQ(code("no_merges", [](GgufWriter& w) { w.SetString("tokenizer.ggml.model", "gpt2"); }),
            StatusCode::kNotFound);
  EXPECT_EQ(code("pre", [](GgufWriter& w) {
              w.SetString("tokenizer.ggml.model", "gpt2");
              w.SetStringArray("tokenizer.ggml.merges", {"a b"});
              w.SetString("tokenizer.ggml.pre", "some-future-pre");
            }),
            StatusCode::kUnimplemented);
  EXPECT_TRUE(LoadGgufTokenizer(WriteTokenizerGguf("ok", v, [](GgufWriter&) {})).ok());
}

TEST(TokenizerTest, FromVocabRejectsInconsistentVocabularies) {
  TokenizerVocab v;
  EXPECT_EQ(Tokenizer::FromVocab(v).status().code(), StatusCode::kInvalidArgument);  // empty
  v.pieces = {"a", "b"};
  v.types = {TokenType::kNormal};
  EXPECT_EQ(Tokenizer::FromVocab(v).status().code(), StatusCode::kInvalidArgument);
  v.types.clear();
  v.eos_id = 2;
  EXPECT_EQ(Tokenizer::FromVocab(v).status().code(), StatusCode::kInvalidArgument);
  v.eos_id = 1;
  v.pre = "unknown-pre";
  EXPECT_EQ(Tokenizer::FromVocab(v).status().code(), StatusCode::kUnimplemented);
  v.pre = "gpt2";
  v.merges = {"nospace"};
  EXPECT_EQ(Tokenizer::FromVocab(v).status().code(), StatusCode::kInvalidArgument);
  v.merges = {"a b"};
  EXPECT_TRUE(Tokenizer::FromVocab(v).ok());
}

}  // namespace
}  // namespace tpserve
