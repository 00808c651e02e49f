// The real model: SmolLM2-135M-Instruct (Q4_1, tied Q8_0 embeddings) greedy continuations of fixed
// prompts equal ids recorded once (and read back as text: "The capital of France is" goes on with
// " Paris"). Skipped when the model file is absent.
// Cross-checked against llama.cpp (llama-server from llama-cpp-python 0.3.36's vendored source, greedy,
// same file): the first two prompts give the same 12 ids; on "Once upon a time," llama.cpp takes
// 1315 (" New") where this engine takes 23324 at the 4th token, a near tie (llama.cpp's own logprobs
// -2.212 vs -2.273) that the different activation rounding of the Q4_1 dot products decides; both
// continue with 27108 436 253 15114 39228 28 351 25854.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "worker/local_generate.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Golden {
  const char* prompt;
  std::vector<int32_t> ids;  // greedy continuation
};

class SmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModelPath)) return;
    auto file = GgufFile::Open(kModelPath);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::move(file).value().release();
    auto config = ModelConfigFromGguf(*file_);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = new ModelConfig(*config);
    auto tokenizer = Tokenizer::FromGguf(*file_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value().release();
    comm_ = MakeLocalCommunicator().release();
    ExecutorOptions options;
    options.num_kv_blocks = 8;  // 128 positions
    auto executor = ModelExecutor::Create(*config_, *file_, comm_, options);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    executor_ = std::move(executor).value().release();
  }
  static void TearDownTestSuite() {
    delete executor_;
    delete comm_;
    delete tokenizer_;
    delete config_;
    delete file_;
  }
  void SetUp() override {
    if (file_ == nullptr) GTEST_SKIP() << kModelPath << " not present";
  }

  static GgufFile* file_;
  static ModelConfig* config_;
  static Tokenizer* tokenizer_;
  static Communicator* comm_;
  static ModelExecutor* executor_;
};

GgufFile* SmolLm2Test::file_ = nullptr;
ModelConfig* SmolLm2Test::config_ = nullptr;
Tokenizer* SmolLm2Test::tokenizer_ = nullptr;
Communicator* SmolLm2Test::comm_ = nullptr;
ModelExecutor* SmolLm2Test::executor_ = nullptr;

TEST_F(SmolLm2Test, GreedyContinuationsMatchGolden) {

  const std::vector<Golden> goldens = {
      {"The capital of France is", {7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 282, 4723}},
      {"def fibonacci(n):", {472, 585, 304, 1758, 216, 32, 42, 448, 1003, 216, 33, 472}},
      {"Once upon a time,", {260, 2240, 282, 23324, 27108, 436, 253, 15114, 39228, 28, 351, 25854}},
  };
  for (const Golden& golden : goldens) {
    const std::vector<int32_t> prompt = tokenizer_->Encode(golden.prompt, config_->add_bos);
    GenerateOptions generate;
    generate.max_tokens = 12;
    generate.ignore_eos = true;
    auto output = LocalGenerate(*executor_, prompt, generate);
    ASSERT_TRUE(output.ok()) << output.status().ToString();
    EXPECT_EQ(output->token_ids, golden.ids) << golden.prompt << " -> " << tokenizer_->Decode(output->token_ids);
  }
}

TEST_F(SmolLm2Test, KnowsTheCapitalOfFrance) {
  GenerateOptions generate;
  generate.max_tokens = 2;
  auto output = LocalGenerate(*executor_, tokenizer_->Encode("The capital of France is", config_->add_bos), generate);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  EXPECT_EQ(tokenizer_->Decode(output->token_ids).rfind(" Paris", 0), 0u) << tokenizer_->Decode(output->token_ids);
}

}  // namespace
}  // namespace tpserve
