// Every architecture from its synthetic GGUF file (tpserve-mkmodel's writer, read back through
// ModelFile and the config reader): the engine's logits within 1e-4 (float weights; 3e-2 to 5e-2
// quantised, whose activations are rounded to 8 bits too) of the independent float64 reference
// (tests/testing/reference_llama, which writes each architecture's features itself), with sliding
// windows smaller than the sequence, and bitwise the same at TP 1, 2, 3 and 4 (Gemma 3's single KV head
// replicated on every rank at TP 4).
#include <gtest/gtest.h>

#include <cctype>

#include "tests/testing/reference_llama.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

struct ArchCase {
  const char* preset;
  const char* architecture;  // what the file must read back as
  DType type;
  // Relative to the float64 reference on the same (dequantised) weights: 1e-4 for float weights; quantised
  // ones also round the activations to 8 bits (see engine_reference_test's WeightTypeTest).
  double tolerance = 1e-4;
};

std::string CaseName(const ArchCase& c) {
  std::string name = std::string(c.preset) + "_" + DTypeName(c.type);
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

std::unique_ptr<ModelFile> WriteAndOpen(const ArchCase& c) {
  return OpenSyntheticGguf(c.preset, c.type, 21, "arch_" + CaseName(c));
}

class ArchitectureTest : public ::testing::TestWithParam<ArchCase> {};

// Prefill of 5 tokens then 9 decodes: the windows (4 to 6 keys) slide well inside the sequence.
TEST_P(ArchitectureTest, MatchesFloat64Reference) {
  std::unique_ptr<ModelFile> file = WriteAndOpen(GetParam());
  const ModelConfig& config = file->config();
  ASSERT_EQ(config.architecture, GetParam().architecture);
  auto ref = ReferenceLlama::Load(config, file->weights());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<int32_t> tokens = RandomTokens(14, config.vocab_size, 5);
  const std::vector<double> expected = ref->Forward(tokens);  // [T, V]
  LocalEngine engine = MakeLocalEngine(config, file->weights());
  const int prefill = 5;
  auto logits = PrefillThenDecode(*engine.executor, tokens, prefill, Iota(0, 4));
  ASSERT_EQ(logits.size(), tokens.size() - prefill + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t t = prefill - 1 + i;
    const std::vector<double> row(expected.begin() + t * config.vocab_size,
                                  expected.begin() + (t + 1) * config.vocab_size);
    EXPECT_LE(RelativeError(logits[i], row), GetParam().tolerance) << GetParam().preset << " position " << t;
  }
}

// The float64 reference with the window removed differs: the window is really applied.
TEST(ArchitectureWindowTest, WindowChangesTheLogits) {
  std::unique_ptr<ModelFile> file = WriteAndOpen({"gemma3-tiny", "gemma3", DType::kF32});
  ModelConfig full = file->config();
  ASSERT_EQ(full.sliding_window, 4);
  full.sliding_window = 0;
  auto windowed_ref = ReferenceLlama::Load(file->config(), file->weights());
  auto full_ref = ReferenceLlama::Load(full, file->weights());
  ASSERT_TRUE(windowed_ref.ok() && full_ref.ok());
  const std::vector<int32_t> tokens = RandomTokens(10, full.vocab_size, 5);
  EXPECT_GT(RelativeError(windowed_ref->Forward(tokens), full_ref->Forward(tokens)), 1e-3);
}

// Every rank of every TP degree returns logits bitwise equal to TP 1's.
TEST_P(ArchitectureTest, TensorParallelDegreesAreBitwiseEqual) {
  std::unique_ptr<ModelFile> file = WriteAndOpen(GetParam());
  const ModelConfig& config = file->config();
  const std::vector<int32_t> tokens = RandomTokens(12, config.vocab_size, 9);
  std::vector<std::vector<float>> single;
  for (int tp : {1, 2, 3, 4}) {
    std::vector<std::vector<std::vector<float>>> per_rank(tp);
    ThreadGroup group(tp);
    group.Run([&](Communicator& comm) {
      per_rank[comm.rank()] =
          PrefillThenDecode(*MakeRankExecutor(config, file->weights(), comm, 16), tokens, 6, Iota(0, 4));
    });
    if (tp == 1) single = per_rank[0];
    for (int rank = 0; rank < tp; ++rank) {
      ASSERT_EQ(per_rank[rank].size(), single.size());
      for (size_t step = 0; step < single.size(); ++step) {
        EXPECT_EQ(per_rank[rank][step], single[step]) << "tp " << tp << " rank " << rank << " step " << step;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, ArchitectureTest,
                         ::testing::Values(ArchCase{"mistral-tiny", "llama", DType::kF32},
                                           ArchCase{"qwen2-tiny", "qwen2", DType::kF32},
                                           ArchCase{"qwen3-tiny", "qwen3", DType::kF32},
                                           ArchCase{"phi3-tiny", "phi3", DType::kF32},
                                           ArchCase{"phi3-tiny", "phi3", DType::kQ8_0, 3e-2},
                                           ArchCase{"gemma3-tiny", "gemma3", DType::kF32},
                                           ArchCase{"gemma3-tiny", "gemma3", DType::kQ4_0, 5e-2}),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace tpserve::testing
