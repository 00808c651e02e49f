// The real engine as an MPI tensor-parallel group: every rank loads its shard of a seeded random
// Llama (9 query / 3 KV heads, vocabulary 1001 that neither 2 nor 3 divides; F32, Q4_1 with a Q8_0
// tied embedding as SmolLM2 has, and Q8_0), rank 0 drives steps through the GroupLeader, and the
// logits must equal bit for bit, and the greedy ids exactly, those of a single-rank executor that
// rank 0 runs on its own: the row-parallel sums are fixed point, so no TP degree rounds differently.
// The same for the synthetic GGUF files of the other architectures (qwen2, phi3 with its fused tensors
// in Q8_0, gemma3 with its single KV head on every rank). Run at np 2, 3, 4.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "tests/testing/memory_weight_source.h"
#include "tests/testing/teacher_forced_drive.h"
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
constexpr int kGreedyTokens = 64;

// F32: head_dim 16 and an FFN of 200 (a partial last 32-column block). Quantised types need
// 32-column blocks at every shard boundary: head_dim 32, FFN 192.
RandomLlama Model(DType type) {
  RandomLlamaShape shape;
  shape.num_layers = 2;
  shape.num_heads = 9;
  shape.num_kv_heads = 3;
  shape.head_dim = type == DType::kF32 ? 16 : 32;
  shape.hidden_size = 64;
  shape.ffn_size = type == DType::kF32 ? 200 : 192;
  shape.vocab_size = 1001;
  shape.rope_layout = RopeLayout::kHalf;
  shape.type = type;
  shape.embd_type = type == DType::kF32 ? DType::kF32 : DType::kQ8_0;
  shape.tied_embeddings = type == DType::kQ4_1;
  shape.seed = 77;
  return MakeRandomLlama(shape);
}

TeacherForcedDrive SixTokenPrefillDrive(int vocab_size) {
  TeacherForcedDrive drive;
  for (int i = 0; i < 12; ++i) drive.prompt.push_back((i * 379 + 11) % vocab_size);
  drive.prefill_len = 6;
  drive.block_table = {0, 1, 2, 3};
  drive.block_size = kBlockSize;
  drive.num_blocks = kNumBlocks;
  drive.greedy_tokens = kGreedyTokens;
  drive.greedy_prompt_len = 3;
  return drive;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Drives the group (rank 0 leading) and a single-rank executor on rank 0 alone: logits bitwise equal,
// greedy ids equal. on_loaded sees this rank's executor once it is made.
void ExpectGroupMatchesSingleRank(const ModelConfig& config, const WeightSource& weights, const std::string& label,
                                  const std::function<void(const ModelExecutor&)>& on_loaded) {
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor,
                     ModelExecutor::Create(config, weights, comm,
                                           SmallExecutorOptions(comm->rank(), comm->size(), kBlockSize, kNumBlocks)));
    on_loaded(*executor);
    return ShareExecutor(std::move(executor));
  };

  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EXPECT_EQ(info.num_kv_blocks, kNumBlocks);
    const TeacherForcedDrive drive = SixTokenPrefillDrive(config.vocab_size);
    ASSIGN_OR_RETURN(DriveOutputs grouped, Drive([&](const StepPlan& plan) { return group.Execute(plan); }, drive));
    // The single-rank reference, on rank 0 alone (no collectives involved).
    std::unique_ptr<Communicator> local_comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> single,
                     ModelExecutor::Create(config, weights, local_comm.get(),
                                           SmallExecutorOptions(0, 1, kBlockSize, kNumBlocks)));
    ASSIGN_OR_RETURN(DriveOutputs reference,
                     Drive([&](const StepPlan& plan) { return single->Execute(plan); }, drive));
    EXPECT_EQ(grouped.logits.size(), reference.logits.size());
    for (size_t step = 0; step < grouped.logits.size() && step < reference.logits.size(); ++step) {
      EXPECT_EQ(grouped.logits[step].size(), static_cast<size_t>(config.vocab_size));
      EXPECT_TRUE(BitwiseEqual(grouped.logits[step], reference.logits[step]))
          << label << " tp " << group.tp_size() << " step " << step;
    }
    EXPECT_EQ(grouped.greedy.size(), static_cast<size_t>(kGreedyTokens));
    EXPECT_EQ(grouped.greedy, reference.greedy) << label << " tp " << group.tp_size();
    return OkStatus();
  };
  Status status = RunGroup(make, lead);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

void ExpectGroupMatchesSingleRankAndKeepsOneOverTpOfTheWeights(DType type) {
  RandomLlama model = Model(type);
  const int64_t total_bytes = model.weights.total_bytes();
  int64_t my_weight_bytes = 0;
  int64_t my_bytes_read = 0;
  ExpectGroupMatchesSingleRank(model.config, model.weights, DTypeName(type), [&](const ModelExecutor& executor) {
    my_bytes_read = model.weights.bytes_read();  // this rank's load is the first read of its fresh model
    my_weight_bytes = executor.weight_bytes();
  });

  // Each rank reads exactly what it keeps, about 1/TP of the model. Margin [0.7, 1.4] x 1/TP: it
  // covers the replicated norms, KV heads replicated where a KV group straddles ranks, and
  // uneven head / FFN / vocabulary splits at TP 2 and 4 of 9 heads.
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double share = static_cast<double>(my_weight_bytes) * size / total_bytes;
  EXPECT_EQ(my_bytes_read, my_weight_bytes);
  EXPECT_GE(share, 0.7) << DTypeName(type) << " rank " << rank;
  EXPECT_LE(share, 1.4) << DTypeName(type) << " rank " << rank;
  std::fprintf(stderr, "%s tp %d rank %d: %lld of %lld weight bytes (%.3f x 1/TP)\n", DTypeName(type), size, rank,
               static_cast<long long>(my_weight_bytes), static_cast<long long>(total_bytes), share);
}

TEST(TensorParallelMpiTest, F32GroupMatchesSingleRankBitwise) {
  ExpectGroupMatchesSingleRankAndKeepsOneOverTpOfTheWeights(DType::kF32);
}

TEST(TensorParallelMpiTest, Q4_1GroupMatchesSingleRankBitwise) {
  ExpectGroupMatchesSingleRankAndKeepsOneOverTpOfTheWeights(DType::kQ4_1);
}

TEST(TensorParallelMpiTest, Q8_0GroupMatchesSingleRankBitwise) {
  ExpectGroupMatchesSingleRankAndKeepsOneOverTpOfTheWeights(DType::kQ8_0);
}

// Each rank writes and opens its own copy of the synthetic file (the same seed: the same bytes).
TEST(TensorParallelMpiTest, ArchitecturesMatchSingleRankBitwise) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const auto& [preset, type] : {std::pair{"qwen2-tiny", DType::kF32}, std::pair{"phi3-tiny", DType::kQ8_0},
                                     std::pair{"gemma3-tiny", DType::kF32}}) {
    SyntheticModelOptions o;
    o.config = *SyntheticPreset(preset);
    o.type = type;
    o.seed = 5;
    const std::string path = ::testing::TempDir() + "/tpserve_tp_mpi_" + std::to_string(getpid()) + "_" +
                             std::to_string(rank) + "_" + preset + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(o, path).ok()) << preset;
    auto file = ModelFile::Open(path);
    std::filesystem::remove(path);  // the open file keeps its descriptor
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ExpectGroupMatchesSingleRank((*file)->config(), (*file)->weights(), preset, [](const ModelExecutor&) {});
  }
}

}  // namespace
}  // namespace tpserve
