// ModelExecutor's contract: plan errors are INVALID_ARGUMENT and leave the cache untouched; results come
// one per sequence needing a token, in plan order; block copies run before the batch.
#include <gtest/gtest.h>

#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

RandomLlama SmallModel() {
  RandomLlamaShape shape;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 16;
  shape.hidden_size = 64;
  shape.vocab_size = 97;
  shape.seed = 9;
  return MakeRandomLlama(shape);
}

TEST(ModelExecutorTest, PlanErrorsLeaveTheCacheUntouched) {
  const RandomLlama model = SmallModel();
  const std::vector<int32_t> tokens = RandomTokens(7, 97, 5);
  LocalEngine reference = MakeLocalEngine(model.config, model.weights, 4, 8);
  const auto expected = PrefillThenDecode(*reference.executor, tokens, 6, {0, 1});

  LocalEngine engine = MakeLocalEngine(model.config, model.weights, 4, 8);
  RunStep(*engine.executor, {SeqStep(1, 0, {tokens.begin(), tokens.begin() + 6}, {0, 1})});
  // Each bad plan also carries a valid sequence that would overwrite the first one's cache.
  const SequencePlan clobber = SeqStep(1, 0, {5, 5, 5, 5, 5, 5}, {0, 1});
  std::vector<SequencePlan> bad = {
      SeqStep(2, 0, {1, 2, 3}, {8}),             // block id out of range
      SeqStep(2, 4, {1, 2}, {2}),                // block table too short for positions 0..5
      SeqStep(2, 0, {1, 97}, {2}),               // token id >= V
      SeqStep(2, 0, {1, -1}, {2}),               // negative token id
      SeqStep(2, 0, {}, {2}),                    // empty sequence
      SeqStep(2, -1, {1}, {2}),                  // negative num_cached
  };
  for (const SequencePlan& seq : bad) {
    StepPlan plan;
    plan.sequences = {clobber, seq};
    auto result = engine.executor->Execute(plan);
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().ToString();
  }
  SequencePlan bad_sampling = SeqStep(2, 0, {1}, {2});
  bad_sampling.sampling.temperature = 1.0f;
  bad_sampling.sampling.top_p = 0.0f;  // outside (0, 1]
  SequencePlan bad_next = SeqStep(2, 0, {1, 2}, {2}, /*needs_token=*/false);
  bad_next.prompt_logprobs = true;
  bad_next.next_prompt_token = 97;  // >= V
  SequencePlan bad_top = SeqStep(2, 0, {1, 2}, {2}, /*needs_token=*/false);
  bad_top.prompt_logprobs = true;
  bad_top.sampling.num_logprobs = -1;
  for (const SequencePlan& seq : {bad_sampling, bad_next, bad_top}) {
    StepPlan plan;
    plan.sequences = {clobber, seq};
    EXPECT_EQ(engine.executor->Execute(plan).status().code(), StatusCode::kInvalidArgument);
  }
  StepPlan copy_plan;
  copy_plan.block_copies = {{2, 8}};
  copy_plan.sequences = {clobber};
  EXPECT_EQ(engine.executor->Execute(copy_plan).status().code(), StatusCode::kInvalidArgument);

  StepResult decode = RunStep(*engine.executor, {SeqStep(1, 6, {tokens[6]}, {0, 1})});
  EXPECT_EQ(decode.sequences.at(0).logits, expected[1]);
}

TEST(ModelExecutorTest, ResultsInPlanOrderOnlyForSequencesNeedingATokenAndCopiesFirst) {
  const RandomLlama model = SmallModel();
  LocalEngine engine = MakeLocalEngine(model.config, model.weights, 4, 8);
  const std::vector<int32_t> prompt = RandomTokens(4, 97, 6);
  StepResult first = RunStep(*engine.executor, {SeqStep(5, 0, prompt, {0}, false), SeqStep(6, 0, prompt, {1}),
                                                SeqStep(4, 0, {prompt[0]}, {2})});
  ASSERT_EQ(first.sequences.size(), 2u);
  EXPECT_EQ(first.sequences[0].seq_id, 6u);
  EXPECT_EQ(first.sequences[1].seq_id, 4u);
  EXPECT_EQ(static_cast<int>(first.sequences[0].logits.size()), 97);
  EXPECT_GT(engine.executor->weight_bytes(), 0);

  // Copy-on-write: block 0 (sequence 5's prompt) copied to block 3, then decoding from block 3 equals
  // decoding from block 1 (the same prompt).
  StepPlan plan;
  plan.block_copies = {{0, 3}};
  plan.return_logits = true;
  plan.sequences = {SeqStep(7, 4, {9}, {3, 4}), SeqStep(6, 4, {9}, {1, 5})};
  auto result = engine.executor->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->sequences.at(0).logits, result->sequences.at(1).logits);
}

TEST(ModelExecutorTest, RejectsMismatchedCommunicatorAndDegree) {
  const RandomLlama model = SmallModel();
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.tp_size = 2;
  EXPECT_EQ(ModelExecutor::Create(model.config, model.weights, comm.get(), options).status().code(),
            StatusCode::kInvalidArgument);
  options.tp_size = 1;
  options.num_kv_blocks = 0;
  options.kv_memory_bytes = 16;
  EXPECT_EQ(ModelExecutor::Create(model.config, model.weights, comm.get(), options).status().code(),
            StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tpserve::testing
