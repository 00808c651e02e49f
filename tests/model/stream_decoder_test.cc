// StreamDecoder: fed token by token it never emits invalid UTF-8, holds split characters back, and
// its output concatenates to exactly Tokenizer::Decode.
#include "model/stream_decoder.h"

#include <gtest/gtest.h>

#include <random>

#include "model/bpe_tokenizer.h"
#include "model/unicode.h"
#include "tests/model/tokenizer_test_util.h"

namespace tpserve {
namespace {

// Streams `ids` and checks every chunk and the total; returns the total.
std::string StreamAll(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder decoder(tok);
  std::string total;
  for (int32_t id : ids) {
    const std::string chunk = decoder.Push(id);
    EXPECT_TRUE(unicode::IsValidUtf8(chunk));
    EXPECT_LE(decoder.pending_bytes(), 3u);
    total += chunk;
  }
  const std::string tail = decoder.Flush();
  EXPECT_TRUE(unicode::IsValidUtf8(tail));
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  total += tail;
  EXPECT_EQ(total, tok.Decode(ids));
  return total;
}

int32_t ByteToken(const Tokenizer& tok, uint8_t byte) {
  std::string symbol;
  unicode::AppendUtf8(ByteToUnicode(byte), &symbol);
  return tok.TokenId(symbol).value();
}

TEST(StreamDecoderTest, CorpusTokenByToken) {
  REQUIRE_SMOLLM(tok);
  for (const std::string& text : testing_tokenizer::Corpus()) {
    EXPECT_EQ(StreamAll(*tok, tok->Encode(text, false)), text);
  }
}

TEST(StreamDecoderTest, RandomIdSequences) {
  REQUIRE_SMOLLM(tok);
  std::mt19937 rng(4242);
  // Byte tokens of multi-byte leads/continuations make split and invalid sequences likely.
  std::vector<int32_t> byte_ids;
  for (int b : {0xE4, 0xBD, 0xA0, 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9, 0xF4, 0xED, 0x41}) byte_ids.push_back(ByteToken(*tok, b));
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> ids(rng() % 30);
    for (int32_t& id : ids) {
      id = rng() % 3 == 0 ? byte_ids[rng() % byte_ids.size()] : static_cast<int32_t>(rng() % tok->vocab_size());
    }
    StreamAll(*tok, ids);
  }
}

TEST(StreamDecoderTest, HoldsASplitCharacterBack) {
  REQUIRE_SMOLLM(tok);
  StreamDecoder decoder(*tok);
  // 你 = E4 BD A0, one byte token each.
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0xE4)), "");
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0xBD)), "");
  EXPECT_EQ(decoder.pending_bytes(), 2u);
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0xA0)), "\xE4\xBD\xA0");
  EXPECT_EQ(decoder.Push(tok->Encode(" ok", false).at(0)), " ok");
  // A dangling lead byte: nothing on Push, one U+FFFD on Flush.
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0xF0)), "");
  EXPECT_EQ(decoder.Flush(), std::string(unicode::kReplacementCharacter));
  // An impossible continuation is replaced at once, the following ASCII kept.
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0xC3)), "");
  EXPECT_EQ(decoder.Push(ByteToken(*tok, 0x41)), std::string(unicode::kReplacementCharacter) + "A");
  EXPECT_EQ(decoder.Flush(), "");
}

TEST(StreamDecoderTest, SpecialTokensStreamAsText) {
  REQUIRE_SMOLLM(tok);
  EXPECT_EQ(StreamAll(*tok, tok->Encode("hi<|im_end|>", false)), "hi<|im_end|>");
}

TEST(StreamDecoderTest, SpmLeadingSpaceLikeDecode) {
  TokenizerVocab v;
  v.model = TokenizerModel::kSpm;
  v.add_space_prefix = true;
  v.pieces = {"<unk>", "<s>", "\xE2\x96\x81hi", "\xE2\x96\x81", "<0xE4>", "<0xBD>", "<0xA0>", "\xE2\x96\x81h"};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kNormal, TokenType::kNormal,
             TokenType::kByte,    TokenType::kByte,    TokenType::kByte,    TokenType::kNormal};
  v.unk_id = 0;
  v.bos_id = 1;
  auto made = Tokenizer::FromVocab(v);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const Tokenizer& tok = **made;
  EXPECT_EQ(tok.Encode("hi 你", false), (std::vector<int32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(StreamAll(tok, {2, 2, 3, 4, 5, 6}), "hi hi \xE4\xBD\xA0");
  EXPECT_EQ(StreamAll(tok, {1, 2}), "<s> hi");
  StreamDecoder decoder(tok);
  EXPECT_EQ(decoder.Push(2), "hi");
  EXPECT_EQ(decoder.Push(2), " hi");
  EXPECT_EQ(decoder.Flush(), "");
  EXPECT_EQ(decoder.Push(2), "hi");  // a new stream after Flush
}

}  // namespace
}  // namespace tpserve
