// The same synthetic model as a GGUF file (Q/K rows in the interleaved RoPE order) and as a Hugging Face
// safetensors directory (half-rotation order) gives the same logits, and both match the float64 reference;
// the same for Mistral, Qwen 2 and Qwen 3 files.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "model/gguf_file.h"
#include "model/safetensors_dir.h"
#include "model/synthetic_model.h"
#include "tests/testing/reference_llama.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

class CheckpointFormatsTest : public ::testing::TestWithParam<DType> {};

TEST_P(CheckpointFormatsTest, GgufAndSafetensorsGiveTheSameLogits) {
  SyntheticModelOptions options;
  ModelConfig& c = options.config;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.ffn_size = 96;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 300;
  c.context_length = 128;
  c.bos_id = 1;
  c.eos_id = 2;
  options.type = GetParam();
  options.seed = 12;
  const std::string dir = ::testing::TempDir() + "/tpserve_formats_" + std::to_string(getpid()) + "_" +
                          DTypeName(GetParam());
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteSyntheticGguf(options, dir + "/model.gguf").ok());
  ASSERT_TRUE(WriteSyntheticHfDir(options, dir + "/hf").ok());

  auto gguf = GgufFile::Open(dir + "/model.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto gguf_config = ModelConfigFromGguf(**gguf);
  ASSERT_TRUE(gguf_config.ok()) << gguf_config.status().ToString();
  auto hf = SafetensorsDir::Open(dir + "/hf");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ(gguf_config->rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ((*hf)->config().rope_layout, RopeLayout::kHalf);

  const std::vector<int32_t> tokens = RandomTokens(10, c.vocab_size, 2);
  LocalEngine gguf_engine = MakeLocalEngine(*gguf_config, **gguf);
  LocalEngine hf_engine = MakeLocalEngine((*hf)->config(), **hf);
  const auto gguf_logits = PrefillThenDecode(*gguf_engine.executor, tokens, 4, Iota(0, 3));
  const auto hf_logits = PrefillThenDecode(*hf_engine.executor, tokens, 4, Iota(0, 3));
  auto ref = ReferenceLlama::Load((*hf)->config(), **hf);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<double> expected = ref->Forward(tokens);
  // Quantised GGUF weights reach the HF directory dequantised; the GGUF path also rounds activations to Q8.
  const double tolerance = IsQuantized(GetParam()) ? 3e-2 : 1e-4;
  // The float64 reference keeps f32 activations; BF16 matmuls round theirs to bf16 (README "Decisions": up to
  // 8.8e-3 measured here).
  const double reference_tolerance = GetParam() == DType::kBF16 ? 2e-2 : 1e-4;
  ASSERT_EQ(gguf_logits.size(), hf_logits.size());
  for (size_t i = 0; i < gguf_logits.size(); ++i) {
    EXPECT_LE(RelativeError(gguf_logits[i], hf_logits[i]), tolerance) << "step " << i;
    const size_t t = 3 + i;
    const std::vector<double> row(expected.begin() + t * c.vocab_size, expected.begin() + (t + 1) * c.vocab_size);
    EXPECT_LE(RelativeError(hf_logits[i], row), reference_tolerance) << "step " << i;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, CheckpointFormatsTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kQ8_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// Mistral (llama with a window), Qwen 2 (biases) and Qwen 3 (Q/K norms): the GGUF and the HF directory
// of one synthetic model read back as the same architecture and give the same logits, which match the
// float64 reference.
class ArchitectureFormatsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchitectureFormatsTest, GgufAndSafetensorsGiveTheSameLogits) {
  SyntheticModelOptions options;
  options.config = *SyntheticPreset(GetParam());
  options.seed = 14;
  std::string dir = ::testing::TempDir() + "/tpserve_arch_formats_" + std::to_string(getpid()) + "_" + GetParam();
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteSyntheticGguf(options, dir + "/model.gguf").ok());
  Status written = WriteSyntheticHfDir(options, dir + "/hf");
  ASSERT_TRUE(written.ok()) << written.ToString();
  auto gguf = GgufFile::Open(dir + "/model.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto gguf_config = ModelConfigFromGguf(**gguf);
  ASSERT_TRUE(gguf_config.ok()) << gguf_config.status().ToString();
  auto hf = SafetensorsDir::Open(dir + "/hf");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  const ModelConfig& hf_config = (*hf)->config();
  EXPECT_EQ(hf_config.architecture, gguf_config->architecture);
  EXPECT_EQ(hf_config.sliding_window, gguf_config->sliding_window);
  EXPECT_EQ(hf_config.head_dim, gguf_config->head_dim);

  const std::vector<int32_t> tokens = RandomTokens(12, hf_config.vocab_size, 4);
  LocalEngine gguf_engine = MakeLocalEngine(*gguf_config, **gguf);
  LocalEngine hf_engine = MakeLocalEngine(hf_config, **hf);
  const auto gguf_logits = PrefillThenDecode(*gguf_engine.executor, tokens, 4, Iota(0, 3));
  const auto hf_logits = PrefillThenDecode(*hf_engine.executor, tokens, 4, Iota(0, 3));
  auto ref = ReferenceLlama::Load(hf_config, **hf);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<double> expected = ref->Forward(tokens);
  const int64_t vocab = hf_config.vocab_size;
  ASSERT_EQ(gguf_logits.size(), hf_logits.size());
  for (size_t i = 0; i < gguf_logits.size(); ++i) {
    EXPECT_LE(RelativeError(gguf_logits[i], hf_logits[i]), 1e-4) << GetParam() << " step " << i;
    const size_t t = 3 + i;
    const std::vector<double> row(expected.begin() + t * vocab, expected.begin() + (t + 1) * vocab);
    EXPECT_LE(RelativeError(hf_logits[i], row), 1e-4) << GetParam() << " step " << i;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Presets, ArchitectureFormatsTest, ::testing::Values("mistral-tiny", "qwen2-tiny", "qwen3-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace tpserve::testing
