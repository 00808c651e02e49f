#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/synthetic_model.h"

namespace tpserve {
namespace {

constexpr char kSmolLm2Path[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

bool HaveSmolLm2() { return std::ifstream(kSmolLm2Path).good(); }

TEST(ModelConfigTest, ReadsSmolLm2Config) {
  if (!HaveSmolLm2()) GTEST_SKIP() << kSmolLm2Path << " not present (run the model fetch script)";
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(kSmolLm2Path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 3u);
  StatusOr<ModelConfig> c = ModelConfigFromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->ffn_size, 1536);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->context_length, 8192);
  EXPECT_FLOAT_EQ(c->rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FALSE(c->rope_scaling.enabled);
  EXPECT_TRUE(c->rope_freq_factors.empty());
  EXPECT_EQ(c->rope_layout, RopeLayout::kInterleaved);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->bos_id, 1);
  EXPECT_EQ(c->eos_id, 2);
  EXPECT_FALSE(c->add_bos);
  EXPECT_NE(c->chat_template.find("<|im_start|>"), std::string::npos);

  // Tensor table: 30 layers x 9 + token_embd + output_norm, types as converted.
  EXPECT_EQ((*file)->Names().size(), 272u);
  const TensorInfo* embd = (*file)->Find("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::kQ8_0);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{49152, 576}));
  const TensorInfo* k = (*file)->Find("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type, DType::kQ4_1);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{192, 576}));
  const TensorInfo* norm = (*file)->Find("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, DType::kF32);
  EXPECT_EQ(norm->shape, (std::vector<int64_t>{576}));
  EXPECT_EQ((*file)->Find("output.weight"), nullptr);
}

ModelConfig SmallConfig() {
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.ffn_size = 128;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 300;
  c.context_length = 128;
  return c;
}

TEST(ModelConfigTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(SmallConfig().Validate().ok());
  struct Case {
    const char* field;
    void (*mutate)(ModelConfig*);
  };
  const Case cases[] = {
      {"num_layers", [](ModelConfig* c) { c->num_layers = 0; }},
      {"num_kv_heads", [](ModelConfig* c) { c->num_kv_heads = 3; }},
      {"num_kv_heads", [](ModelConfig* c) { c->num_kv_heads = 8; }},
      {"head_dim", [](ModelConfig* c) { c->head_dim = 15; }},
      {"vocab_size", [](ModelConfig* c) { c->vocab_size = 0; }},
      {"rope_theta", [](ModelConfig* c) { c->rope_theta = -1; }},
      {"rms_eps", [](ModelConfig* c) { c->rms_eps = 0; }},
      {"eos_id", [](ModelConfig* c) { c->eos_id = 300; }},
      {"rope_scaling", [](ModelConfig* c) {
         c->rope_scaling.enabled = true;
         c->rope_scaling.high_freq_factor = 0.5f;
       }},
      {"architecture", [](ModelConfig* c) { c->architecture = "falcon"; }},
      {"sliding_window", [](ModelConfig* c) { c->sliding_window = -1; }},
      {"rope_scaling.linear_factor", [](ModelConfig* c) { c->rope_scaling.linear_factor = 0.5f; }},
  };
  for (const Case& tc : cases) {
    ModelConfig c = SmallConfig();
    tc.mutate(&c);
    Status s = c.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << tc.field;
    EXPECT_NE(s.message().find(tc.field), std::string::npos) << s.message();
  }
}

StatusOr<ModelConfig> ReadBack(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return ModelConfigFromGguf(*file);
}

TEST(ModelConfigTest, UnsupportedArchitectureIsUnimplementedListingTheSupportedOnes) {
  const std::string path = ::testing::TempDir() + "/tpserve_config_falcon.gguf";
  GgufWriter w;
  w.SetString("general.architecture", "falcon");
  ASSERT_TRUE(w.Open(path).ok());
  ASSERT_TRUE(w.Finish().ok());
  StatusOr<ModelConfig> c = ReadBack(path);
  ASSERT_EQ(c.status().code(), StatusCode::kUnimplemented) << c.status().ToString();
  EXPECT_NE(c.status().message().find("\"falcon\""), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("supported: llama, qwen2, qwen3, phi3, gemma3"), std::string::npos)
      << c.status().message();
}

// Each architecture's synthetic file reads back with its own keys: layout, window, local RoPE base.
TEST(ModelConfigTest, ArchitecturesReadBackFromTheirKeys) {
  for (const char* preset : {"mistral-tiny", "qwen2-tiny", "qwen3-tiny", "phi3-tiny", "gemma3-tiny"}) {
    SyntheticModelOptions o;
    o.config = *SyntheticPreset(preset);
    const std::string path = ::testing::TempDir() + "/tpserve_config_" + preset + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(o, path).ok()) << preset;
    StatusOr<ModelConfig> c = ReadBack(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const ModelConfig& want = o.config;
    EXPECT_EQ(c->architecture, want.architecture) << preset;
    EXPECT_EQ(c->head_dim, want.head_dim) << preset;
    EXPECT_EQ(c->num_kv_heads, want.num_kv_heads) << preset;
    EXPECT_EQ(c->sliding_window, want.sliding_window) << preset;
    EXPECT_EQ(c->rope_theta_local, want.rope_theta_local) << preset;
    EXPECT_EQ(c->tied_embeddings, want.tied_embeddings) << preset;
    EXPECT_EQ(c->rope_layout, want.architecture == "llama" ? RopeLayout::kInterleaved : RopeLayout::kHalf) << preset;
  }
}

// Gemma 3: layers 0-4 slide with the local RoPE base, layer 5 is global with the file's base.
TEST(ModelConfigTest, GemmaLayerKindsAndRopeBases) {
  ModelConfig c = *SyntheticPreset("gemma3-tiny");
  ASSERT_TRUE(c.Validate().ok());
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.IsSlidingLayer(l), l != 5) << l;
  EXPECT_FLOAT_EQ(c.RopeInverseFrequencies(0)[1], std::pow(10000.0, -2.0 / c.head_dim));
  EXPECT_FLOAT_EQ(c.RopeInverseFrequencies(5)[1], std::pow(1000000.0, -2.0 / c.head_dim));
  c.rope_scaling.linear_factor = 8;  // Gemma 3 4B+: linear scaling on the global layers only
  EXPECT_FLOAT_EQ(c.RopeInverseFrequencies(0)[1], std::pow(10000.0, -2.0 / c.head_dim));
  EXPECT_FLOAT_EQ(c.RopeInverseFrequencies(5)[1], std::pow(1000000.0, -2.0 / c.head_dim) / 8);
  c.sliding_window = 0;  // no window: every layer global
  EXPECT_FALSE(c.IsSlidingLayer(0));
  ModelConfig mistral = *SyntheticPreset("mistral-tiny");
  EXPECT_TRUE(mistral.IsSlidingLayer(0) && mistral.IsSlidingLayer(5));
}

TEST(ModelConfigTest, RopeFrequenciesWithoutScaling) {
  ModelConfig c = SmallConfig();
  c.rope_theta = 10000;
  std::vector<float> inv = c.RopeInverseFrequencies();
  ASSERT_EQ(inv.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(inv[i], std::pow(10000.0, -2.0 * i / 16));
}

// Llama 3.1's published parameters (theta 500000, D 128, factor 8, low 1, high 4, original 8192)
// against values computed independently from the formula in Meta's reference code.
TEST(ModelConfigTest, RopeFrequenciesWithLlama3Scaling) {
  ModelConfig c = SmallConfig();
  c.head_dim = 128;
  c.rope_theta = 500000;
  c.rope_scaling = {true, 8.0f, 1.0f, 4.0f, 8192};
  std::vector<float> inv = c.RopeInverseFrequencies();
  ASSERT_EQ(inv.size(), 64u);
  const double pi = 3.14159265358979323846;
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * pi / base;
    double expect;
    if (wavelen < 8192.0 / 4) {
      expect = base;
      ++kept;
    } else if (wavelen > 8192.0 / 1) {
      expect = base / 8;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      expect = (1 - smooth) * base / 8 + smooth * base;
      ++blended;
    }
    EXPECT_NEAR(inv[i], expect, 1e-6 * expect) << i;
  }
  // The three regimes all occur for these parameters, so each branch is exercised.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[63], static_cast<float>(std::pow(500000.0, -126.0 / 128) / 8));
}

TEST(ModelConfigTest, RopeFreqFactorsFromFileTakePrecedence) {
  ModelConfig c = SmallConfig();
  c.rope_scaling.enabled = true;
  c.rope_freq_factors.assign(8, 2.0f);
  std::vector<float> inv = c.RopeInverseFrequencies();
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(inv[i], std::pow(10000.0, -2.0 * i / 16) / 2);
}

}  // namespace
}  // namespace tpserve
