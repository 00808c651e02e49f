// The worker group (RunGroup, GroupLeader, GroupFollower, GroupChannel) at any size, with a fake
// executor whose result needs every rank's contribution (through an all-reduce), so a rank that
// missed or misread a plan changes the leader's answer.
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "comm/plan_codec.h"
#include "worker/group_runtime.h"

namespace tpserve {
namespace {

constexpr int32_t kFakeVocab = 1000;

// Each rank contributes (rank + 1) * token for every token of a sequence; the sum over ranks picks
// the "sampled" token. Token ids >= kFakeVocab are a plan error, found before any collective.
class FakeTpExecutor : public StepExecutor {
 public:
  // `num_executed` (may be null) counts the steps run; it outlives the executor, which RunGroup
  // destroys before returning.
  FakeTpExecutor(Communicator* comm, int* num_executed) : comm_(comm), num_executed_(num_executed) {}

  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    for (const SequencePlan& seq : plan.sequences) {
      for (int32_t id : seq.token_ids) {
        if (id >= kFakeVocab) return InvalidArgument("token id out of range");
      }
    }
    if (num_executed_ != nullptr) ++*num_executed_;
    std::vector<float> partial;  // [S]
    for (const SequencePlan& seq : plan.sequences) {
      float sum = 0;
      for (int32_t id : seq.token_ids) sum += static_cast<float>((comm_->rank() + 1) * id);
      partial.push_back(sum);
    }
    if (!partial.empty()) RETURN_IF_ERROR(comm_->AllReduceSum(partial.data(), partial.size()));
    StepResult result;
    result.step_id = plan.step_id;
    for (size_t s = 0; s < plan.sequences.size(); ++s) {
      if (!plan.sequences[s].needs_token) continue;
      SequenceResult seq;
      seq.seq_id = plan.sequences[s].seq_id;
      seq.token_id = static_cast<int32_t>(partial[s]) % kFakeVocab;
      result.sequences.push_back(std::move(seq));
    }
    return result;
  }


 private:
  Communicator* comm_;
  int* num_executed_;
};

int32_t ExpectedToken(const std::vector<int32_t>& token_ids, int tp_size) {
  const int64_t weight = int64_t{tp_size} * (tp_size + 1) / 2;
  int64_t sum = 0;
  for (int32_t id : token_ids) sum += weight * id;
  return static_cast<int32_t>(sum % kFakeVocab);
}

StepPlan RandomPlan(std::mt19937& rng, uint64_t step_id) {
  StepPlan plan;
  plan.step_id = step_id;
  const int num_sequences = 1 + rng() % 4;
  for (int s = 0; s < num_sequences; ++s) {
    SequencePlan seq;
    seq.seq_id = 100 + s;
    for (int i = 1 + rng() % 20; i > 0; --i) seq.token_ids.push_back(rng() % kFakeVocab);
    seq.block_table = {0, 1};
    seq.needs_token = rng() % 4 != 0;
    plan.sequences.push_back(std::move(seq));
  }
  return plan;
}

TEST(GroupMpiTest, LeaderResultsNeedEveryRankAndFollowersStopOnShutdown) {
  int num_executed = 0;
  int tp_size = 0;
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    tp_size = comm->size();
    auto executor = std::make_unique<FakeTpExecutor>(comm, &num_executed);
    // Ranks fit different numbers of blocks; the group offers the smallest.
    return LoadedShard{std::move(executor), 100 - comm->rank()};
  };
  constexpr int kNumSteps = 50;
  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EXPECT_EQ(group.tp_size(), tp_size);
    EXPECT_EQ(info.tp_size, tp_size);
    EXPECT_EQ(info.num_kv_blocks, 100 - (tp_size - 1));
    std::mt19937 rng(31);
    for (int step = 0; step < kNumSteps; ++step) {
      StepPlan plan = RandomPlan(rng, step);
      ASSIGN_OR_RETURN(StepResult result, group.Execute(plan));
      EXPECT_EQ(result.step_id, static_cast<uint64_t>(step));
      size_t r = 0;
      for (const SequencePlan& seq : plan.sequences) {
        if (!seq.needs_token) continue;
        EXPECT_LT(r, result.sequences.size());
        if (r >= result.sequences.size()) break;
        EXPECT_EQ(result.sequences[r].seq_id, seq.seq_id);
        EXPECT_EQ(result.sequences[r].token_id, ExpectedToken(seq.token_ids, tp_size)) << "step " << step;
        ++r;
      }
      EXPECT_EQ(r, result.sequences.size());
    }
    // A plan the executors refuse on every rank (token id >= V): the group keeps serving.
    StepPlan bad = RandomPlan(rng, 1000);
    bad.sequences[0].token_ids[0] = kFakeVocab + 5;
    EXPECT_EQ(group.Execute(bad).status().code(), StatusCode::kInvalidArgument);
    // A structurally invalid plan never leaves the leader.
    StepPlan invalid = RandomPlan(rng, 1001);
    invalid.sequences[0].token_ids[0] = -1;
    EXPECT_EQ(group.Execute(invalid).status().code(), StatusCode::kInvalidArgument);
    // And the group still works.
    StepPlan after = RandomPlan(rng, 1002);
    after.sequences[0].needs_token = true;
    ASSIGN_OR_RETURN(StepResult result, group.Execute(after));
    EXPECT_EQ(result.sequences.at(0).token_id, ExpectedToken(after.sequences[0].token_ids, tp_size));
    EXPECT_EQ(group.num_steps(), kNumSteps + 2);
    return OkStatus();
  };
  Status status = RunGroup(make, lead);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(num_executed, kNumSteps + 1);  // every rank ran every good step
}

TEST(GroupMpiTest, LoadFailureOnOneRankFailsEveryRank) {
  bool led = false;
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    if (comm->rank() == comm->size() - 1) return ResourceExhausted("no room for the KV cache");
    return LoadedShard{std::make_unique<FakeTpExecutor>(comm, nullptr), 10};
  };
  Status status = RunGroup(make, [&](GroupLeader&, const GroupInfo&) {
    led = true;
    return OkStatus();
  });
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_FALSE(led);
  if (rank == size - 1) {
    EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  } else {
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
  }
}

}  // namespace
}  // namespace tpserve
