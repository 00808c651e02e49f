// The CUDA executor as a TP 2 group over NCCL (one GPU per rank), driven through the GroupLeader,
// against the single-rank CPU executor that rank 0 runs on its own: logits within 1e-4 of the
// row's largest, 32 greedy ids equal. Skips on every rank unless each rank has a GPU of its own.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "tests/testing/memory_weight_source.h"
#include "worker/cuda/cuda_executor.h"
#include "worker/group_launch.h"
#include "worker/group_runtime.h"
#include "worker/local_generate.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

using testing::MakeRandomLlama;
using testing::RandomLlama;
using testing::RandomLlamaShape;

constexpr int kBlockSize = 4;
constexpr int64_t kNumBlocks = 40;
constexpr int kGreedyTokens = 32;

ExecutorOptions Options(int tp_rank, int tp_size) {
  ExecutorOptions options;
  options.tp_rank = tp_rank;
  options.tp_size = tp_size;
  options.block_size = kBlockSize;
  options.num_kv_blocks = kNumBlocks;
  options.num_threads = 1;
  return options;
}

struct Outputs {
  std::vector<std::vector<float>> logits;  // per step [V]
  std::vector<int32_t> greedy;             // [kGreedyTokens]
};

// A 7-token prefill, then one decode per remaining prompt token (full logits), then a greedy run.
StatusOr<Outputs> Drive(const StepFunction& execute, int vocab) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 11; ++i) prompt.push_back((i * 379 + 11) % vocab);
  Outputs out;
  for (size_t t = 7; t <= prompt.size(); ++t) {
    SequencePlan seq;
    seq.seq_id = 7;
    seq.num_cached = t == 7 ? 0 : static_cast<int32_t>(t - 1);
    seq.token_ids = t == 7 ? std::vector<int32_t>(prompt.begin(), prompt.begin() + 7)
                           : std::vector<int32_t>{prompt[t - 1]};
    seq.block_table = {0, 1, 2};
    seq.needs_token = true;
    StepPlan plan;
    plan.step_id = t;
    plan.return_logits = true;
    plan.sequences.push_back(seq);
    ASSIGN_OR_RETURN(StepResult result, execute(plan));
    if (result.sequences.size() != 1) return Internal("expected one sequence result");
    out.logits.push_back(result.sequences[0].logits);
  }
  GenerateCapacity capacity;
  capacity.block_size = kBlockSize;
  capacity.num_blocks = kNumBlocks;
  GenerateOptions generate;
  generate.max_tokens = kGreedyTokens;
  generate.ignore_eos = true;
  generate.seq_id = 2;
  ASSIGN_OR_RETURN(GenerateOutput output, LocalGenerate(execute, capacity, {prompt.begin(), prompt.begin() + 4}, generate));
  out.greedy = output.token_ids;
  return out;
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

TEST(CudaExecutorMpiTest, NcclGroupMatchesCpuSingleRank) {
  int count = 0;
  const int has_own_gpu = cudaGetDeviceCount(&count) == cudaSuccess && count >= LocalRanksOnHost() ? 1 : 0;
  int all_have = 0;
  MPI_Allreduce(&has_own_gpu, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have) GTEST_SKIP() << "needs one CUDA device per rank (" << count << " visible here)";

  RandomLlamaShape shape;
  shape.num_layers = 2;
  shape.num_heads = 9;
  shape.num_kv_heads = 3;
  shape.head_dim = 16;
  shape.hidden_size = 64;
  shape.ffn_size = 200;
  shape.vocab_size = 1001;
  shape.rope_layout = RopeLayout::kHalf;
  shape.seed = 78;
  RandomLlama model = MakeRandomLlama(shape);

  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor,
                     CudaExecutor::Create(model.config, model.weights, comm, Options(comm->rank(), comm->size())));
    const int64_t num_blocks = executor->num_kv_blocks();
    std::shared_ptr<CudaExecutor> shared = std::move(executor);
    return LoadedShard{std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) {
                         return shared->Execute(plan);
                       }),
                       num_blocks};
  };
  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EXPECT_EQ(info.num_kv_blocks, kNumBlocks);
    ASSIGN_OR_RETURN(Outputs grouped, Drive([&](const StepPlan& plan) { return group.Execute(plan); },
                                            shape.vocab_size));
    std::unique_ptr<Communicator> local_comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> single,
                     ModelExecutor::Create(model.config, model.weights, local_comm.get(), Options(0, 1)));
    ASSIGN_OR_RETURN(Outputs reference, Drive([&](const StepPlan& plan) { return single->Execute(plan); },
                                              shape.vocab_size));
    EXPECT_EQ(grouped.logits.size(), reference.logits.size());
    for (size_t step = 0; step < grouped.logits.size() && step < reference.logits.size(); ++step) {
      EXPECT_LE(RelativeError(grouped.logits[step], reference.logits[step]), 1e-4)
          << "tp " << group.tp_size() << " step " << step;
    }
    EXPECT_EQ(grouped.greedy.size(), static_cast<size_t>(kGreedyTokens));
    EXPECT_EQ(grouped.greedy, reference.greedy) << "tp " << group.tp_size();
    return OkStatus();
  };
  Status status = RunGroup(make, lead);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

}  // namespace
}  // namespace tpserve
