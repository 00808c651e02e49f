// The real engine as an MPI tensor-parallel group: every rank loads its shard of a seeded random
// Llama (9 query / 3 KV heads, vocabulary 1001 that neither 2 nor 3 divides; F32, Q4_1 with a Q8_0
// tied embedding as SmolLM2 has, and Q8_0), rank 0 drives steps through the GroupLeader, and the
// logits must equal bit for bit, and the greedy ids exactly, those of a single-rank executor that
// rank 0 runs on its own: the row-parallel sums are fixed point, so no TP degree rounds differently.
// Run at np 2, 3, 4.
#include <cstdio>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "tests/testing/memory_weight_source.h"
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

ExecutorOptions Options(int tp_rank, int tp_size) {
  ExecutorOptions options;
  options.tp_rank = tp_rank;
  options.tp_size = tp_size;
  options.block_size = kBlockSize;
  options.num_kv_blocks = kNumBlocks;
  options.num_threads = 1;
  return options;
}

std::vector<int32_t> Prompt() {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back((i * 379 + 11) % 1001);
  return tokens;
}

struct Outputs {
  std::vector<std::vector<float>> logits;  // per step [V]
  std::vector<int32_t> greedy;             // [kGreedyTokens]
};

// Prefill of 6 tokens then one decode step per remaining prompt token (full logits each step),
// then a 64-token greedy generation of a second sequence — all through `execute`.
StatusOr<Outputs> Drive(const StepFunction& execute) {
  Outputs out;
  const std::vector<int32_t> prompt = Prompt();
  const std::vector<int32_t> blocks = {0, 1, 2, 3};
  for (size_t t = 6; t <= prompt.size(); ++t) {
    SequencePlan seq;
    seq.seq_id = 7;
    seq.num_cached = t == 6 ? 0 : static_cast<int32_t>(t - 1);
    seq.token_ids = t == 6 ? std::vector<int32_t>(prompt.begin(), prompt.begin() + 6)
                           : std::vector<int32_t>{prompt[t - 1]};
    seq.block_table = blocks;
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
  ASSIGN_OR_RETURN(GenerateOutput output, LocalGenerate(execute, capacity, {prompt.begin(), prompt.begin() + 3}, generate));
  out.greedy = output.token_ids;
  return out;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectGroupMatchesSingleRankAndKeepsOneOverTpOfTheWeights(DType type) {
  RandomLlama model = Model(type);
  const int64_t total_bytes = model.weights.total_bytes();

  int64_t my_weight_bytes = 0;
  int64_t my_bytes_read = 0;
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    const int64_t before = model.weights.bytes_read();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor,
                     ModelExecutor::Create(model.config, model.weights, comm, Options(comm->rank(), comm->size())));
    my_bytes_read = model.weights.bytes_read() - before;
    my_weight_bytes = executor->weight_bytes();
    const int64_t num_blocks = executor->num_kv_blocks();
    std::shared_ptr<ModelExecutor> shared = std::move(executor);
    return LoadedShard{std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) {
                         return shared->Execute(plan);
                       }),
                       num_blocks};
  };

  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EXPECT_EQ(info.num_kv_blocks, kNumBlocks);
    ASSIGN_OR_RETURN(Outputs grouped, Drive([&](const StepPlan& plan) { return group.Execute(plan); }));
    // The single-rank reference, on rank 0 alone (no collectives involved).
    std::unique_ptr<Communicator> local_comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> single,
                     ModelExecutor::Create(model.config, model.weights, local_comm.get(), Options(0, 1)));
    ASSIGN_OR_RETURN(Outputs reference, Drive([&](const StepPlan& plan) { return single->Execute(plan); }));
    EXPECT_EQ(single->weight_bytes(), total_bytes);
    EXPECT_EQ(grouped.logits.size(), reference.logits.size());
    for (size_t step = 0; step < grouped.logits.size() && step < reference.logits.size(); ++step) {
      EXPECT_EQ(grouped.logits[step].size(), 1001u);
      EXPECT_TRUE(BitwiseEqual(grouped.logits[step], reference.logits[step]))
          << DTypeName(type) << " tp " << group.tp_size() << " step " << step;
    }
    EXPECT_EQ(grouped.greedy.size(), static_cast<size_t>(kGreedyTokens));
    EXPECT_EQ(grouped.greedy, reference.greedy) << DTypeName(type) << " tp " << group.tp_size();
    return OkStatus();
  };
  Status status = RunGroup(make, lead);
  ASSERT_TRUE(status.ok()) << status.ToString();

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

}  // namespace
}  // namespace tpserve
