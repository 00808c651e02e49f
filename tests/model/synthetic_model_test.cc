#include "model/synthetic_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>

#include "model/gguf_file.h"
#include "model/model_file.h"
#include "model/tokenizer.h"

namespace tpserve {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/synthetic_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// 3 query heads sharing 1 KV head (GQA 3:1) and a prime vocabulary.
SyntheticModelOptions AwkwardOptions(DType type) {
  SyntheticModelOptions o;
  o.config = *SyntheticPreset("tiny");
  o.config.hidden_size = 96;
  o.config.num_heads = 3;
  o.config.num_kv_heads = 1;
  o.config.head_dim = 32;
  o.config.ffn_size = 160;
  o.config.vocab_size = 397;
  o.type = type;
  o.seed = 5;
  return o;
}

TEST(SyntheticModelTest, VocabularyIsValidForAnySize) {
  for (int size : {300, 301, 1000, 49152}) {
    SyntheticVocab v = MakeSyntheticVocab(size);
    ASSERT_EQ(v.tokens.size(), static_cast<size_t>(size));
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    ASSERT_EQ(v.types.size(), v.tokens.size());
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.types[0], 2);
    EXPECT_EQ(v.types[1], 3);
    EXPECT_EQ(v.tokens[3], "<0x00>");
    EXPECT_EQ(v.tokens[3 + 0x41], "<0x41>");
    EXPECT_EQ(v.tokens[258], "<0xFF>");
    for (int b = 3; b < 259; ++b) EXPECT_EQ(v.types[b], 6);
    EXPECT_EQ(v.tokens[259], "\xE2\x96\x81");
    std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(unique.size(), v.tokens.size()) << "duplicate pieces at size " << size;
    // Every multi-symbol piece splits into two pieces of the vocabulary (reachable by merges),
    // and normal pieces have strictly decreasing scores.
    for (int i = 260; i < size; ++i) {
      EXPECT_EQ(v.types[i], 1);
      EXPECT_LT(v.scores[i], v.scores[i - 1]);
      const std::string& t = v.tokens[i];
      const size_t first = t.rfind("\xE2\x96\x81", 0) == 0 ? 3 : 1;
      if (t.size() <= first) continue;
      bool split = false;
      for (size_t cut = first; cut < t.size() && !split; ++cut) {
        split = unique.count(t.substr(0, cut)) && unique.count(t.substr(cut));
      }
      EXPECT_TRUE(split) << t;
    }
  }
}

// The phi3 vocabulary ends with Phi-3's <|endoftext|> (control), which llama.cpp requires of a vocabulary
// named phi3; every other id is the llama vocabulary's. The written file's tokenizer reads it as one id and
// ends a turn there.
TEST(SyntheticModelTest, Phi3VocabularyCarriesEndOfText) {
  const SyntheticVocab llama = MakeSyntheticVocab(300), phi3 = MakeSyntheticVocab(300, "phi3");
  ASSERT_EQ(phi3.tokens.size(), 300u);
  EXPECT_EQ(phi3.tokens.back(), "<|endoftext|>");
  EXPECT_EQ(phi3.types.back(), 3);
  EXPECT_EQ(std::vector<std::string>(phi3.tokens.begin(), phi3.tokens.end() - 1),
            std::vector<std::string>(llama.tokens.begin(), llama.tokens.end() - 1));
  EXPECT_EQ(std::count(llama.tokens.begin(), llama.tokens.end(), "<|endoftext|>"), 0);

  SyntheticModelOptions o;
  o.config = *SyntheticPreset("phi3-tiny");
  const std::string path = TempPath("phi3.gguf");
  ASSERT_TRUE(WriteSyntheticGguf(o, path).ok());
  StatusOr<std::unique_ptr<GgufFile>> g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGguf(**g);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Encode("<|endoftext|>", false), std::vector<int32_t>{299});
  EXPECT_EQ((*t)->eot_id(), 299);
  EXPECT_EQ((*t)->eos_id(), 2);
  std::remove(path.c_str());
}

TEST(SyntheticModelTest, PresetsAreValidAndUnknownIsAnError) {
  for (const char* name : {"llama2-7b", "llama3-8b", "smollm2-135m", "llama-1b", "tiny"}) {
    StatusOr<ModelConfig> c = SyntheticPreset(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_TRUE(c->Validate().ok()) << name << " " << c->Validate().ToString();
  }
  EXPECT_EQ(SyntheticPreset("llama3-8b")->num_kv_heads, 8);
  EXPECT_EQ(SyntheticPreset("llama3-8b")->vocab_size, 128256);
  EXPECT_TRUE(SyntheticPreset("llama-1b")->rope_scaling.enabled);
  EXPECT_TRUE(SyntheticPreset("smollm2-135m")->tied_embeddings);
  EXPECT_EQ(SyntheticPreset("gpt-5").status().code(), StatusCode::kInvalidArgument);
}

TEST(SyntheticModelTest, RowsAreSeededAndScaled) {
  SyntheticModelOptions o = AwkwardOptions(DType::kF32);
  std::vector<float> a(4096), b(4096), c(4096), d(4096);
  SyntheticRow(o, "blk.0.ffn_down.weight", 3, a.data(), 4096);
  SyntheticRow(o, "blk.0.ffn_down.weight", 3, b.data(), 4096);
  SyntheticRow(o, "blk.0.ffn_down.weight", 4, c.data(), 4096);
  SyntheticRow(o, "blk.1.ffn_down.weight", 3, d.data(), 4096);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  o.seed = 6;
  SyntheticRow(o, "blk.0.ffn_down.weight", 3, b.data(), 4096);
  EXPECT_NE(a, b);
  double sum = 0, sq = 0;
  for (float x : a) {
    sum += x;
    sq += x * x;
  }
  const double mean = sum / 4096, stddev = std::sqrt(sq / 4096 - mean * mean);
  EXPECT_NEAR(mean, 0, 0.05 / std::sqrt(4096.0) * 10);
  EXPECT_NEAR(stddev * std::sqrt(4096.0), 1.0, 0.05);  // std 1/sqrt(fan_in)
  SyntheticRow(o, "blk.0.attn_norm.weight", 0, a.data(), 4096);
  for (float x : a) {
    EXPECT_GE(x, 0.9f);
    EXPECT_LE(x, 1.1f);
  }
}

TEST(SyntheticModelTest, GgufRoundTripsForEveryType) {
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    SyntheticModelOptions o = AwkwardOptions(type);
    o.config.tied_embeddings = type == DType::kQ8_0;
    const std::string path = TempPath(std::string("m_") + DTypeName(type) + ".gguf");
    ASSERT_TRUE(WriteSyntheticGguf(o, path).ok());
    StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE((*m)->gguf(), nullptr);
    EXPECT_TRUE((*m)->hf_dir().empty());
    const ModelConfig& c = (*m)->config();
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.hidden_size, 96);
    EXPECT_EQ(c.num_heads, 3);
    EXPECT_EQ(c.num_kv_heads, 1);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.ffn_size, 160);
    EXPECT_EQ(c.vocab_size, 397);
    EXPECT_EQ(c.tied_embeddings, o.config.tied_embeddings);
    EXPECT_EQ(c.bos_id, 1);
    EXPECT_EQ(c.eos_id, 2);
    EXPECT_TRUE(c.add_bos);
    EXPECT_EQ(*(*m)->gguf()->GetString("tokenizer.ggml.model"), "llama");
    EXPECT_EQ((*m)->gguf()->Get("tokenizer.ggml.tokens")->strings.size(), 397u);

    const WeightSource& w = (*m)->weights();
    EXPECT_EQ(w.Find("blk.1.ffn_norm.weight")->type, DType::kF32);
    EXPECT_EQ(w.Find("blk.1.ffn_up.weight")->type, type);
    // Each stored row is the synthetic row encoded in `type`: exact for F32, within the type's
    // rounding otherwise.
    const double tol = type == DType::kF32 ? 0 : type == DType::kF16 ? 1e-3 : type == DType::kBF16 ? 8e-3
                     : type == DType::kQ8_0 ? 0.02 : 0.15;
    for (const std::string& name : {std::string("blk.1.attn_q.weight"), std::string("token_embd.weight"),
                                    std::string("blk.0.ffn_down.weight"), std::string("output_norm.weight")}) {
      StatusOr<HostTensor> t = w.Read(name);
      ASSERT_TRUE(t.ok()) << name;
      const std::vector<float> got = t->ToF32();
      std::vector<float> want(t->cols);
      const double scale = name.find("norm") != std::string::npos ? 0 : std::sqrt(3.0 / t->cols);
      for (int64_t r = 0; r < t->rows; ++r) {
        SyntheticRow(o, name, r, want.data(), t->cols);
        for (int64_t k = 0; k < t->cols; ++k) {
          ASSERT_NEAR(got[r * t->cols + k], want[k], scale == 0 ? 0 : tol * scale) << name << " " << r << "," << k;
        }
      }
    }
    // Same seed, same bytes.
    const std::string again = path + ".again";
    ASSERT_TRUE(WriteSyntheticGguf(o, again).ok());
    EXPECT_EQ(ReadBytes(path), ReadBytes(again));
    std::remove(path.c_str());
    std::remove(again.c_str());
  }
}

TEST(SyntheticModelTest, HeadDimOtherThanHiddenOverHeadsAndRopeScalingRoundTrip) {
  SyntheticModelOptions o = AwkwardOptions(DType::kF16);
  o.config.head_dim = 48;  // 3 x 48 != 96: recorded as key_length
  o.config.rope_scaling = {true, 32.0f, 1.0f, 4.0f, 8192};
  o.config.rope_theta = 500000;
  const std::string path = TempPath("hd.gguf");
  ASSERT_TRUE(WriteSyntheticGguf(o, path).ok());
  StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.head_dim, 48);
  EXPECT_EQ((*m)->weights().Find("blk.0.attn_q.weight")->shape, (std::vector<int64_t>{144, 96}));
  EXPECT_EQ((*m)->weights().Find("blk.0.attn_output.weight")->shape, (std::vector<int64_t>{96, 144}));
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.original_context_length, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.RopeInverseFrequencies(), o.config.RopeInverseFrequencies());
  std::remove(path.c_str());
}

TEST(SyntheticModelTest, RejectsShapesTheTypeCannotHold) {
  SyntheticModelOptions o = AwkwardOptions(DType::kQ4_0);
  o.config.ffn_size = 100;  // ffn_down rows of 100 elements are not whole Q4_0 blocks
  EXPECT_EQ(WriteSyntheticGguf(o, TempPath("bad.gguf")).code(), StatusCode::kInvalidArgument);
  o = AwkwardOptions(DType::kF32);
  o.config.num_kv_heads = 2;  // does not divide 3 heads
  EXPECT_EQ(WriteSyntheticGguf(o, TempPath("bad.gguf")).code(), StatusCode::kInvalidArgument);
  std::remove(TempPath("bad.gguf").c_str());
}

// The HF directory's tokenizer.json and the GGUF's vocabulary describe the same tokenizer.
TEST(SyntheticModelTest, HfTokenizerMatchesGgufTokenizer) {
  SyntheticModelOptions o = AwkwardOptions(DType::kF32);
  o.config.vocab_size = 2000;
  o.config.num_layers = 1;
  const std::string path = TempPath("tok.gguf"), dir = TempPath("tok_hf");
  ASSERT_TRUE(WriteSyntheticGguf(o, path).ok());
  ASSERT_TRUE(WriteSyntheticHfDir(o, dir).ok());
  StatusOr<std::unique_ptr<GgufFile>> g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok());
  StatusOr<std::unique_ptr<Tokenizer>> a = Tokenizer::FromGguf(**g);
  StatusOr<std::unique_ptr<Tokenizer>> b = Tokenizer::FromHfDir(dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const char* text : {"hello world", "the cat sat on the mat", "Zebra 42, ok?", " two  spaces",
                           "caf\xC3\xA9 \xE2\x82\xAC" "5", "abcabcabc xyzzy"}) {
    const std::vector<int32_t> ia = (*a)->Encode(text, true), ib = (*b)->Encode(text, true);
    EXPECT_EQ(ia, ib) << text;
    EXPECT_EQ((*a)->Decode(ia), (*b)->Decode(ib)) << text;
    EXPECT_EQ((*a)->Decode((*a)->Encode(text, false)), text);
  }
  std::remove(path.c_str());
  std::filesystem::remove_all(dir);
}

TEST(SyntheticModelTest, HfRowPermutationMatchesLlamaCppConverter) {
  // convert_hf_to_gguf reshapes each head's rows as (2, D/2) and swaps the axes: GGUF row
  // 2i + s of a head holds HF row s * D/2 + i.
  const int d = 8;
  for (int64_t head = 0; head < 3; ++head) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < d / 2; ++i) {
        EXPECT_EQ(HfRowToGgufRow(head * d + s * d / 2 + i, d), head * d + 2 * i + s);
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
