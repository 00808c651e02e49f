// Prompt logprobs through a real MPI tensor-parallel group (the leader broadcasts each plan, so the
// followers must decode the prompt-logprob fields to compute the same rows): a chunked prefill
// batched with other sequences scores every prompt token bitwise as the group reports it when
// teacher-forced to it, and bitwise as a single-rank executor does (the row-parallel sums are fixed
// point, so no TP degree rounds differently). A seeded random Llama with 9 query / 3 KV heads and a
// vocabulary of 1001 that neither 2 nor 3 divides, Q4_1 with a tied Q8_0 embedding as SmolLM2 has.
// Run at np 2 and 3.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tests/testing/memory_weight_source.h"
#include "tests/testing/prompt_logprobs_drive.h"
#include "tests/testing/teacher_forced_drive.h"
#include "worker/group_runtime.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ForceByDecode;
using testing::ScoreByPrefill;

constexpr int kBlockSize = 4;
constexpr int64_t kNumBlocks = 64;

testing::RandomLlama Model() {
  testing::RandomLlamaShape shape;
  shape.num_heads = 9;
  shape.num_kv_heads = 3;
  shape.head_dim = 32;
  shape.hidden_size = 64;
  shape.ffn_size = 192;
  shape.vocab_size = 1001;
  shape.rope_layout = RopeLayout::kHalf;
  shape.type = DType::kQ4_1;
  shape.embd_type = DType::kQ8_0;
  shape.tied_embeddings = true;
  shape.seed = 78;
  return testing::MakeRandomLlama(shape);
}

TEST(PromptLogprobsMpiTest, GroupScoresAsItForcesAndAsOneRank) {
  testing::RandomLlama model = Model();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 23; ++i) prompt.push_back((i * 379 + 11) % 1001);
  constexpr int kChunk = 7;  // 7 + 7 + 7 + 2

  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor,
                     ModelExecutor::Create(model.config, model.weights, comm,
                                           testing::SmallExecutorOptions(comm->rank(), comm->size(), kBlockSize,
                                                                         kNumBlocks)));
    return testing::ShareExecutor(std::move(executor));
  };
  auto lead = [&](GroupLeader& group, const GroupInfo&) -> Status {
    const StepFunction grouped = [&](const StepPlan& plan) { return group.Execute(plan); };
    ASSIGN_OR_RETURN(std::vector<PromptTokenLogprob> scored, ScoreByPrefill(grouped, prompt, kChunk, 1001));
    ASSIGN_OR_RETURN(std::vector<SequenceResult> forced, ForceByDecode(grouped, prompt));
    ExpectBitwiseEqual(scored, forced, prompt);

    std::unique_ptr<Communicator> local_comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> single,
                     ModelExecutor::Create(model.config, model.weights, local_comm.get(),
                                           testing::SmallExecutorOptions(0, 1, kBlockSize, kNumBlocks)));
    ASSIGN_OR_RETURN(std::vector<PromptTokenLogprob> alone,
                     ScoreByPrefill([&](const StepPlan& plan) { return single->Execute(plan); }, prompt, kChunk, 1001));
    EXPECT_EQ(alone.size(), scored.size());
    for (size_t i = 0; i < alone.size() && i < scored.size(); ++i) {
      EXPECT_EQ(std::memcmp(&alone[i].logprob, &scored[i].logprob, sizeof(float)), 0)
          << "tp " << group.tp_size() << " position " << i << ": " << scored[i].logprob << " vs " << alone[i].logprob;
    }
    return OkStatus();
  };
  const Status status = RunGroup(make, lead);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

}  // namespace
}  // namespace tpserve
