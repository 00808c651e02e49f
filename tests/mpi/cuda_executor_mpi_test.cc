// The CUDA executor as a TP 2 group over NCCL (one GPU per rank), driven through the GroupLeader,
// against the single-rank CPU executor that rank 0 runs on its own: logits within 1e-4 of the
// row's largest, 32 greedy ids equal. Skips on every rank unless each rank has a GPU of its own.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "tests/testing/memory_weight_source.h"
#include "tests/testing/teacher_forced_drive.h"
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
using testing::Drive;
using testing::DriveOutputs;
using testing::ShareExecutor;
using testing::SmallExecutorOptions;
using testing::TeacherForcedDrive;

constexpr int kBlockSize = 4;
constexpr int64_t kNumBlocks = 40;
constexpr int kGreedyTokens = 32;

TeacherForcedDrive SevenTokenPrefillDrive(int vocab) {
  TeacherForcedDrive drive;
  for (int i = 0; i < 11; ++i) drive.prompt.push_back((i * 379 + 11) % vocab);
  drive.prefill_len = 7;
  drive.block_table = {0, 1, 2};
  drive.block_size = kBlockSize;
  drive.num_blocks = kNumBlocks;
  drive.greedy_tokens = kGreedyTokens;
  drive.greedy_prompt_len = 4;
  return drive;
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
                     CudaExecutor::Create(model.config, model.weights, comm,
                                          SmallExecutorOptions(comm->rank(), comm->size(), kBlockSize, kNumBlocks)));
    return ShareExecutor(std::move(executor));
  };
  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EXPECT_EQ(info.num_kv_blocks, kNumBlocks);
    const TeacherForcedDrive drive = SevenTokenPrefillDrive(shape.vocab_size);
    ASSIGN_OR_RETURN(DriveOutputs grouped, Drive([&](const StepPlan& plan) { return group.Execute(plan); }, drive));
    std::unique_ptr<Communicator> local_comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> single,
                     ModelExecutor::Create(model.config, model.weights, local_comm.get(),
                                           SmallExecutorOptions(0, 1, kBlockSize, kNumBlocks)));
    ASSIGN_OR_RETURN(DriveOutputs reference,
                     Drive([&](const StepPlan& plan) { return single->Execute(plan); }, drive));
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
