// The CUDA executor against the CPU ModelExecutor (the reference) on the same weights: logits of
// prefill and decode steps within a stated tolerance, greedy ids equal, mixed batches with block
// copies, plan errors refused, every architecture's synthetic file, and the real SmolLM2 Q4_1 model.
// Skips without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "model/tokenizer.h"
#include "tests/gpu/require_gpu.h"
#include "tests/testing/memory_weight_source.h"
#include "worker/cuda/cuda_executor.h"
#include "worker/local_generate.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

using testing::MakeRandomLlama;
using testing::RandomLlama;
using testing::RandomLlamaShape;

constexpr int kBlockSize = 4;
constexpr int64_t kNumBlocks = 48;

ExecutorOptions Options() {
  ExecutorOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = kNumBlocks;
  options.num_threads = 2;
  return options;
}

// Both engines over one model, each with its own local communicator.
struct Engines {
  std::unique_ptr<Communicator> cpu_comm = MakeLocalCommunicator();
  std::unique_ptr<Communicator> gpu_comm = MakeLocalCommunicator();
  std::unique_ptr<ModelExecutor> cpu;
  std::unique_ptr<CudaExecutor> gpu;

  Engines(const ModelConfig& config, const WeightSource& weights, const ExecutorOptions& options = Options()) {
    auto cpu_or = ModelExecutor::Create(config, weights, cpu_comm.get(), options);
    CHECK(cpu_or.ok()) << cpu_or.status().ToString();
    cpu = std::move(cpu_or).value();
    auto gpu_or = CudaExecutor::Create(config, weights, gpu_comm.get(), options);
    CHECK(gpu_or.ok()) << gpu_or.status().ToString();
    gpu = std::move(gpu_or).value();
  }
};

SequencePlan Seq(uint64_t seq_id, int32_t num_cached, std::vector<int32_t> tokens, std::vector<int32_t> blocks) {
  SequencePlan seq;
  seq.seq_id = seq_id;
  seq.num_cached = num_cached;
  seq.token_ids = std::move(tokens);
  seq.block_table = std::move(blocks);
  seq.needs_token = true;
  return seq;
}

StepPlan Plan(std::vector<SequencePlan> seqs, std::vector<std::pair<int32_t, int32_t>> copies = {}) {
  StepPlan plan;
  plan.sequences = std::move(seqs);
  plan.block_copies = std::move(copies);
  plan.return_logits = true;
  return plan;
}

// max |a - b| / max |b|
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// Runs `plan` on both engines; every sampled row's logits within `tolerance` (relative to the
// row's largest logit) and the same greedy token. Returns the largest error seen.
double ExpectSameStep(Engines& engines, const StepPlan& plan, double tolerance, const std::string& what) {
  auto want = engines.cpu->Execute(plan);
  auto got = engines.gpu->Execute(plan);
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!want.ok() || !got.ok()) return 1.0;
  EXPECT_EQ(got->sequences.size(), want->sequences.size()) << what;
  double worst = 0;
  for (size_t s = 0; s < got->sequences.size() && s < want->sequences.size(); ++s) {
    const double error = RelativeError(got->sequences[s].logits, want->sequences[s].logits);
    worst = std::max(worst, error);
    EXPECT_LE(error, tolerance) << what << " row " << s;
    EXPECT_EQ(got->sequences[s].seq_id, want->sequences[s].seq_id);
    EXPECT_EQ(got->sequences[s].token_id, want->sequences[s].token_id) << what << " row " << s;
  }
  return worst;
}

std::vector<int32_t> Tokens(int n, int vocab, int salt) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 379 + salt * 101 + 11) % vocab);
  return tokens;
}

std::vector<int32_t> Greedy(const StepFunction& execute, const std::vector<int32_t>& prompt, int max_tokens) {
  GenerateCapacity capacity;
  capacity.block_size = kBlockSize;
  capacity.num_blocks = kNumBlocks;
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.ignore_eos = true;
  auto output = LocalGenerate(execute, capacity, prompt, options);
  EXPECT_TRUE(output.ok()) << output.status().ToString();
  return output.ok() ? output->token_ids : std::vector<int32_t>{};
}

// A synthetic GGUF (model/synthetic_model.h) of 6 query / 2 KV heads and a vocabulary of 301
// (odd, prime factors 7 and 43), written once per suite.
class CudaExecutorSyntheticTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveGpu()) return;
    dir_ = new std::string(::testing::TempDir() + "/tpserve_cuda_executor_" + std::to_string(getpid()));
    std::filesystem::create_directories(*dir_);
    SyntheticModelOptions options;
    auto config = SyntheticPreset("tiny");
    ASSERT_TRUE(config.ok());
    options.config = *config;
    options.config.num_layers = 3;
    options.config.hidden_size = 96;
    options.config.num_heads = 6;
    options.config.num_kv_heads = 2;
    options.config.head_dim = 16;
    options.config.ffn_size = 160;
    options.config.vocab_size = 301;
    options.type = DType::kF32;
    options.seed = 31;
    ASSERT_TRUE(WriteSyntheticGguf(options, *dir_ + "/model.gguf").ok());
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { REQUIRE_GPU(); }

  static std::string* dir_;
};
std::string* CudaExecutorSyntheticTest::dir_ = nullptr;

// F32 weights: cuBLAS (full f32, no TF32) against the CPU's f32 kernels in another summation order.
// Logits within 1e-4 of the row's largest (the TP-equality tolerance); 32 greedy ids equal.
TEST_F(CudaExecutorSyntheticTest, F32LogitsWithinToleranceAndGreedyIdsEqual) {
  auto model = ModelFile::Open(*dir_ + "/model.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& config = (*model)->config();
  Engines engines(config, (*model)->weights());
  EXPECT_EQ(engines.gpu->num_kv_blocks(), kNumBlocks);
  EXPECT_EQ(engines.gpu->weight_bytes(), engines.cpu->weight_bytes());

  const std::vector<int32_t> prompt = Tokens(13, config.vocab_size, 1);
  const std::vector<int32_t> blocks = {5, 2, 9, 7, 11};
  double worst = ExpectSameStep(engines, Plan({Seq(1, 0, {prompt.begin(), prompt.begin() + 9}, blocks)}), 1e-4,
                                "prefill of 9");
  for (int t = 9; t < 13; ++t) {
    worst = std::max(worst, ExpectSameStep(engines, Plan({Seq(1, t, {prompt[t]}, blocks)}), 1e-4,
                                           "decode at " + std::to_string(t)));
  }
  std::fprintf(stderr, "F32 synthetic: largest relative logit error %.3g\n", worst);

  const std::vector<int32_t> greedy_prompt = Tokens(5, config.vocab_size, 2);
  const auto cpu_ids = Greedy([&](const StepPlan& p) { return engines.cpu->Execute(p); }, greedy_prompt, 32);
  const auto gpu_ids = Greedy([&](const StepPlan& p) { return engines.gpu->Execute(p); }, greedy_prompt, 32);
  ASSERT_EQ(cpu_ids.size(), 32u);
  EXPECT_EQ(gpu_ids, cpu_ids);
}

// Each KV cache type of 16-value heads (q8_0 needs 32: cuda_kernels_test covers it) gives the CPU's logits,
// the cache rounded the same way on both.
TEST_F(CudaExecutorSyntheticTest, KvTypesMatchCpu) {
  auto model = ModelFile::Open(*dir_ + "/model.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& config = (*model)->config();
  for (DType kv_dtype : {DType::kF16, DType::kBF16}) {
    ExecutorOptions options = Options();
    options.kv_dtype = kv_dtype;
    Engines engines(config, (*model)->weights(), options);
    const std::vector<int32_t> prompt = Tokens(11, config.vocab_size, 3);
    const std::vector<int32_t> blocks = {4, 1, 8};
    ExpectSameStep(engines, Plan({Seq(1, 0, {prompt.begin(), prompt.begin() + 8}, blocks)}), 1e-4,
                   std::string(DTypeName(kv_dtype)) + " prefill of 8");
    for (int t = 8; t < 11; ++t) {
      ExpectSameStep(engines, Plan({Seq(1, t, {prompt[t]}, blocks)}), 1e-4,
                     std::string(DTypeName(kv_dtype)) + " decode at " + std::to_string(t));
    }
  }
}

// A step mixing a prefill chunk, decodes, a sequence that needs no token and a copy-on-write block
// copy gives the same rows as on the CPU.
TEST_F(CudaExecutorSyntheticTest, MixedBatchWithBlockCopyMatchesCpu) {
  auto model = ModelFile::Open(*dir_ + "/model.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().vocab_size;
  Engines engines((*model)->config(), (*model)->weights());
  const auto a = Tokens(10, vocab, 3), b = Tokens(6, vocab, 4), c = Tokens(7, vocab, 5);
  // Step 1: A prefills 6 (blocks 0, 1), B prefills 6 (blocks 2, 3), C prefills 7 without a token.
  SequencePlan c_seq = Seq(3, 0, c, {4, 5});
  c_seq.needs_token = false;
  ExpectSameStep(engines, Plan({Seq(1, 0, {a.begin(), a.begin() + 6}, {0, 1}), Seq(2, 0, b, {2, 3}), c_seq}), 1e-4,
                 "step 1");
  // Step 2: B forks into D by copying its partly filled block 3 to 6; A decodes 4 tokens as a chunk,
  // B and D decode one each, C's next token.
  ExpectSameStep(engines,
                 Plan({Seq(1, 6, {a.begin() + 6, a.end()}, {0, 1, 7}), Seq(2, 6, {17}, {2, 3}),
                       Seq(4, 6, {42}, {2, 6}), Seq(3, 7, {99}, {4, 5})},
                      {{3, 6}}),
                 1e-4, "step 2");
}

TEST_F(CudaExecutorSyntheticTest, RefusesBadPlansAndStaysUsable) {
  auto model = ModelFile::Open(*dir_ + "/model.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().vocab_size;
  Engines engines((*model)->config(), (*model)->weights());
  EXPECT_EQ(engines.gpu->Execute(Plan({Seq(1, 0, {1, 2}, {kNumBlocks})})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engines.gpu->Execute(Plan({Seq(1, 0, {1, vocab}, {0})})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engines.gpu->Execute(Plan({Seq(1, 0, {1, 2, 3, 4, 5}, {0})})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engines.gpu->Execute(Plan({}, {{0, kNumBlocks}})).status().code(), StatusCode::kInvalidArgument);
  ExpectSameStep(engines, Plan({Seq(1, 0, {1, 2, 3}, {0})}), 1e-4, "after refused plans");
}

// Quantised weights: both backends quantise activations to the same Q8 blocks and take exact
// integer block sums; only f32 accumulation orders differ.
TEST(CudaExecutorQuantTest, QuantizedWeightsMatchCpu) {
  REQUIRE_GPU();
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    RandomLlamaShape shape;
    shape.num_layers = 2;
    shape.hidden_size = 128;
    shape.num_heads = 8;
    shape.num_kv_heads = 2;
    shape.head_dim = 16;
    shape.ffn_size = 96;
    shape.vocab_size = 257;
    shape.tied_embeddings = true;
    shape.type = type;
    shape.embd_type = DType::kQ8_0;
    shape.seed = 5;
    RandomLlama model = MakeRandomLlama(shape);
    Engines engines(model.config, model.weights);
    const auto prompt = Tokens(11, shape.vocab_size, 6);
    double worst = ExpectSameStep(engines, Plan({Seq(1, 0, prompt, {0, 1, 2})}), 1e-3, DTypeName(type));
    worst = std::max(worst, ExpectSameStep(engines, Plan({Seq(1, 11, {7}, {0, 1, 2})}), 1e-3, DTypeName(type)));
    std::fprintf(stderr, "%s: largest relative logit error %.3g\n", DTypeName(type), worst);
  }
}

// Every architecture's synthetic file (biases, per-head norms, fused tensors, post norms, GELU, windows
// shorter than the 14 tokens): a 6-token prefill and 8 decodes within 1e-4 of the CPU executor.
TEST(CudaExecutorArchitectureTest, EveryArchitectureMatchesCpu) {
  REQUIRE_GPU();
  for (const char* preset : {"mistral-tiny", "qwen2-tiny", "qwen3-tiny", "phi3-tiny", "gemma3-tiny"}) {
    SyntheticModelOptions options;
    options.config = *SyntheticPreset(preset);
    options.seed = 8;
    const std::string path = ::testing::TempDir() + "/tpserve_cuda_arch_" + std::to_string(getpid()) + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(options, path).ok()) << preset;
    auto model = ModelFile::Open(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Engines engines((*model)->config(), (*model)->weights());
    const auto prompt = Tokens(14, (*model)->config().vocab_size, 3);
    const std::vector<int32_t> blocks = {3, 0, 8, 1};
    double worst = ExpectSameStep(engines, Plan({Seq(1, 0, {prompt.begin(), prompt.begin() + 6}, blocks)}), 1e-4,
                                  std::string(preset) + " prefill");
    for (int t = 6; t < 14; ++t) {
      worst = std::max(worst, ExpectSameStep(engines, Plan({Seq(1, t, {prompt[t]}, blocks)}), 1e-4,
                                             std::string(preset) + " decode at " + std::to_string(t)));
    }
    std::fprintf(stderr, "%s: largest relative logit error %.3g\n", preset, worst);
  }
}

// The real model (Q4_1 matrices, tied Q8_0 embeddings): the first 16 greedy ids equal the CPU's.
TEST(CudaExecutorSmolLm2Test, FirstSixteenGreedyIdsMatchCpu) {
  REQUIRE_GPU();
  constexpr char kPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(kPath)) GTEST_SKIP() << kPath << " not present";
  auto model = ModelFile::Open(kPath);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Engines engines((*model)->config(), (*model)->weights());
  auto tokenizer = Tokenizer::FromGguf(*(*model)->gguf());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  // Prompts whose first 16 greedy tokens each win by a logit margin of at least 0.34 on the CPU (0.341
  // and 0.429, tpserve-teacher-logits' engine rows; every ISA level gives the same bits), far above the
  // two backends' differences in f32 accumulation order. Prompts with near-ties test the tie, not the
  // engine: "Once upon a time," (0.004 at its 4th token, where the first H200 run took the runner-up,
  // bench/README.md "First GPU run"), "The quick brown fox" (0.005 at its 5th), and since stop 51's softmax
  // and RMSNorm sums "def fibonacci(n):" (0.008 at its 14th) and "The first step is to" (0.121 at its 3rd).
  for (const char* text : {"The largest planet in our solar system is", "class Stack:"}) {
    const std::vector<int32_t> prompt = (*tokenizer)->Encode(text, (*model)->config().add_bos);
    const auto cpu_ids = Greedy([&](const StepPlan& p) { return engines.cpu->Execute(p); }, prompt, 16);
    const auto gpu_ids = Greedy([&](const StepPlan& p) { return engines.gpu->Execute(p); }, prompt, 16);
    ASSERT_EQ(cpu_ids.size(), 16u);
    EXPECT_EQ(gpu_ids, cpu_ids) << text;
  }
}

}  // namespace
}  // namespace tpserve
