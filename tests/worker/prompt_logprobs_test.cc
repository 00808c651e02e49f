// Prompt logprobs (SequencePlan::prompt_logprobs): the logprob of every prompt token, computed during
// a chunked prefill batched with other sequences, is bitwise the logprob the engine reports when it
// is teacher-forced to that token at that position (one decode step per token, the token forced by
// a +1e30 logit bias: the sampler reports the drawn token's logprob under the raw distribution), top-n
// included, at TP 1 and TP 2 (ranks as threads); and it lies within tolerance of the float64
// reference's log-softmax (synthetic model) — on a synthetic model and on SmolLM2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "tests/testing/reference_llama.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

using StepFn = std::function<StepResult(const StepPlan&)>;

constexpr int kBlockSize = 4;
constexpr int32_t kNumLogprobs = 3;

StepResult Run(const StepFn& execute, std::vector<SequencePlan> seqs) {
  StepPlan plan;
  plan.sequences = std::move(seqs);
  return execute(plan);
}

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// The prompt's logprobs from a prefill in chunks of `chunk` tokens (seq 1, blocks 0..), batched with
// a sequence that prefills then decodes (seq 2) and, in the first step, another scored prompt (seq 3).
std::vector<PromptTokenLogprob> ScoreByPrefill(const StepFn& execute, const std::vector<int32_t>& prompt, int chunk,
                                               int vocab) {
  const int32_t num_prompt = static_cast<int32_t>(prompt.size());
  const std::vector<int32_t> other = RandomTokens(24, vocab, 99);
  std::vector<PromptTokenLogprob> scored;
  int step = 0;
  for (int32_t begin = 0; begin < num_prompt; begin += chunk, ++step) {
    const int32_t n = std::min(chunk, num_prompt - begin);
    std::vector<SequencePlan> seqs;
    // seq 2: 3 tokens of prefill, then a decode per step (its blocks 40..).
    if (step == 0) {
      seqs.push_back(SeqStep(2, 0, {other.begin(), other.begin() + 3}, Iota(40, 6)));
    } else {
      seqs.push_back(SeqStep(2, 2 + step, {other[2 + step]}, Iota(40, 6)));
    }
    SequencePlan seq = SeqStep(1, begin, {prompt.begin() + begin, prompt.begin() + begin + n}, Iota(0, 10),
                               begin + n == num_prompt);
    seq.prompt_logprobs = true;
    seq.next_prompt_token = begin + n < num_prompt ? prompt[begin + n] : -1;
    seq.sampling.num_logprobs = kNumLogprobs;
    seqs.push_back(seq);
    if (step == 0) {  // seq 3: a short prompt scored whole, listed after seq 1
      SequencePlan third = SeqStep(3, 0, {other.begin() + 10, other.begin() + 15}, Iota(50, 2));
      third.prompt_logprobs = true;
      third.sampling.num_logprobs = 1;
      seqs.push_back(third);
    }
    const StepResult result = Run(execute, seqs);
    EXPECT_EQ(result.prompt_logprobs.size(), step == 0 ? 2u : 1u);
    EXPECT_EQ(result.prompt_logprobs.at(0).seq_id, 1u);
    const auto& positions = result.prompt_logprobs.at(0).positions;
    EXPECT_EQ(static_cast<int32_t>(positions.size()), seq.num_prompt_logprobs());
    scored.insert(scored.end(), positions.begin(), positions.end());
    if (step == 0) {
      EXPECT_EQ(result.prompt_logprobs.at(1).seq_id, 3u);
      EXPECT_EQ(result.prompt_logprobs.at(1).positions.size(), 4u);
    }
  }
  return scored;
}

// Teacher forcing: seq 9 fed prompt[j] at position j, forced to sample prompt[j + 1].
std::vector<SequenceResult> ForceByDecode(const StepFn& execute, const std::vector<int32_t>& prompt) {
  std::vector<SequenceResult> forced;
  for (size_t j = 0; j + 1 < prompt.size(); ++j) {
    SequencePlan seq = SeqStep(9, static_cast<int32_t>(j), {prompt[j]}, Iota(20, 10));
    seq.sampling.logit_bias = {{prompt[j + 1], 1e30f}};
    seq.sampling.num_logprobs = kNumLogprobs;
    seq.sample_index = static_cast<uint32_t>(j);
    const StepResult result = Run(execute, {seq});
    EXPECT_TRUE(result.prompt_logprobs.empty());
    forced.push_back(result.sequences.at(0));
    EXPECT_EQ(forced.back().token_id, prompt[j + 1]) << "position " << j;
  }
  return forced;
}

void ExpectBitwiseEqual(const std::vector<PromptTokenLogprob>& scored, const std::vector<SequenceResult>& forced,
                        const std::vector<int32_t>& prompt) {
  ASSERT_EQ(scored.size(), prompt.size() - 1);
  ASSERT_EQ(forced.size(), prompt.size() - 1);
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(scored[i].token_id, prompt[i + 1]) << "position " << i;
    EXPECT_EQ(Bits(scored[i].logprob), Bits(forced[i].logprob))
        << "position " << i << ": " << scored[i].logprob << " vs " << forced[i].logprob;
    ASSERT_EQ(scored[i].top_logprobs.size(), static_cast<size_t>(kNumLogprobs));
    for (int k = 0; k < kNumLogprobs; ++k) {
      EXPECT_EQ(scored[i].top_logprobs[k].token_id, forced[i].top_logprobs[k].token_id) << "position " << i;
      EXPECT_EQ(Bits(scored[i].top_logprobs[k].logprob), Bits(forced[i].top_logprobs[k].logprob)) << "position " << i;
    }
  }
}

struct RankRun {
  std::vector<PromptTokenLogprob> scored;
  std::vector<SequenceResult> forced;
};

// Runs both drives on every rank of a TP group of `tp_size` threads.
std::vector<RankRun> RunGroup(const ModelConfig& config, const WeightSource& weights, int tp_size,
                              const std::vector<int32_t>& prompt, int chunk) {
  std::vector<RankRun> runs(tp_size);
  ThreadGroup group(tp_size, std::chrono::seconds(120));
  group.Run([&](Communicator& comm) {
    ExecutorOptions options;
    options.tp_rank = comm.rank();
    options.tp_size = tp_size;
    options.block_size = kBlockSize;
    options.num_kv_blocks = 64;
    options.num_threads = 1;
    auto created = ModelExecutor::Create(config, weights, &comm, options);
    CHECK(created.ok()) << created.status().ToString();
    std::unique_ptr<ModelExecutor> executor = std::move(created).value();
    const StepFn execute = [&](const StepPlan& plan) {
      auto result = executor->Execute(plan);
      CHECK(result.ok()) << result.status().ToString();
      return std::move(result).value();
    };
    runs[comm.rank()].scored = ScoreByPrefill(execute, prompt, chunk, config.vocab_size);
    runs[comm.rank()].forced = ForceByDecode(execute, prompt);
  });
  return runs;
}

void ExpectRanksAgree(const std::vector<RankRun>& runs) {
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].scored.size(), runs[0].scored.size());
    for (size_t i = 0; i < runs[0].scored.size(); ++i) {
      EXPECT_EQ(Bits(runs[r].scored[i].logprob), Bits(runs[0].scored[i].logprob)) << "rank " << r << " position " << i;
    }
  }
}

struct TypeCase {
  DType type;
  double tolerance;  // absolute on logprobs, against the float64 reference of the dequantised weights
};

class PromptLogprobsTypeTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(PromptLogprobsTypeTest, SyntheticEqualsTeacherForcingAndReference) {
  RandomLlamaShape shape;
  shape.num_heads = 6;
  shape.num_kv_heads = 3;
  shape.head_dim = 32;  // Q8_0 row-parallel slices: 3 heads x 32 and 64 FFN columns per rank
  shape.hidden_size = 64;
  shape.ffn_size = 128;
  shape.vocab_size = 211;  // odd: the TP 2 vocabulary shards differ in size
  shape.type = GetParam().type;
  shape.seed = 21;
  const RandomLlama model = MakeRandomLlama(shape);
  auto reference = ReferenceLlama::Load(model.config, model.weights);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  const std::vector<int32_t> prompt = RandomTokens(17, shape.vocab_size, 5);
  const std::vector<double> logits = reference->Forward(prompt);  // [P, V]
  const int vocab = shape.vocab_size;

  for (int tp : {1, 2}) {
    SCOPED_TRACE("TP " + std::to_string(tp));
    const std::vector<RankRun> runs = RunGroup(model.config, model.weights, tp, prompt, /*chunk=*/6);
    ExpectRanksAgree(runs);
    ExpectBitwiseEqual(runs[0].scored, runs[0].forced, prompt);
    double max_error = 0;
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
      const double* row = logits.data() + i * vocab;
      double m = row[0], sum = 0;
      for (int v = 0; v < vocab; ++v) m = std::max(m, row[v]);
      for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - m);
      const double expected = row[prompt[i + 1]] - m - std::log(sum);
      max_error = std::max(max_error, std::abs(runs[0].scored[i].logprob - expected));
    }
    EXPECT_LT(max_error, GetParam().tolerance);
    char error[32];
    std::snprintf(error, sizeof(error), "%.2e", max_error);
    RecordProperty("max_abs_error_tp" + std::to_string(tp), error);
  }
}

// Measured: F32 2.8e-7, Q8_0 9.0e-3 (its activations are quantised to 8 bits per token).
INSTANTIATE_TEST_SUITE_P(Types, PromptLogprobsTypeTest,
                         ::testing::Values(TypeCase{DType::kF32, 1e-4}, TypeCase{DType::kQ8_0, 2e-2}),
                         [](const auto& info) { return std::string(DTypeName(info.param.type)); });

TEST(PromptLogprobsTest, SmolLm2EqualsTeacherForcing) {
  constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " not present";
  auto file = GgufFile::Open(kModelPath);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto config = ModelConfigFromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto tokenizer = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::vector<int32_t> prompt =
      (*tokenizer)->Encode("The capital of France is Paris. The capital of Germany is Berlin.", /*add_bos=*/false);
  ASSERT_GT(prompt.size(), 10u);  // longer than two chunks of 5
  for (int tp : {1, 2}) {
    SCOPED_TRACE("TP " + std::to_string(tp));
    const std::vector<RankRun> runs = RunGroup(*config, **file, tp, prompt, /*chunk=*/5);
    ExpectRanksAgree(runs);
    ExpectBitwiseEqual(runs[0].scored, runs[0].forced, prompt);
  }
}

}  // namespace
}  // namespace tpserve::testing
