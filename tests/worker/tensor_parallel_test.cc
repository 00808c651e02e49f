// Tensor parallelism in one process: TP ranks are threads joined by in-process communicators. Logits at
// TP = 2, 3, 4 equal TP = 1 within 1e-4 on a 9/3-head model whose vocabulary (101) neither 2 nor 3
// divides; greedy ids agree over 64 tokens; each rank reads and keeps only its slices.
#include <gtest/gtest.h>

#include <mutex>

#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"
#include "worker/local_generate.h"

namespace tpserve::testing {
namespace {

struct RankOutput {
  std::vector<std::vector<float>> logits;  // per step [V]
  std::vector<int32_t> greedy;
  int64_t weight_bytes = 0;
  int64_t bytes_read = 0;
};

RandomLlama Model() {
  RandomLlamaShape shape;
  shape.num_heads = 9;
  shape.num_kv_heads = 3;
  shape.head_dim = 16;
  shape.hidden_size = 64;
  shape.ffn_size = 192;
  shape.vocab_size = 101;
  shape.rope_layout = RopeLayout::kHalf;
  shape.seed = 33;
  return MakeRandomLlama(shape);
}

// Runs the same steps on every rank of a TP group; returns each rank's outputs.
std::vector<RankOutput> RunGroup(RandomLlama& model, int tp_size, const std::vector<int32_t>& tokens) {
  std::vector<RankOutput> outputs(tp_size);
  std::mutex load_mu;  // ranks load one after another so each one's reads can be counted
  ThreadGroup group(tp_size);
  group.Run([&](Communicator& comm) {
    const int rank = comm.rank();
    ExecutorOptions options;
    options.tp_rank = rank;
    options.tp_size = tp_size;
    options.block_size = 4;
    options.num_kv_blocks = 40;
    options.num_threads = 1;
    std::unique_ptr<ModelExecutor> executor;
    {
      std::lock_guard<std::mutex> lock(load_mu);
      const int64_t read_before = model.weights.bytes_read();
      auto created = ModelExecutor::Create(model.config, model.weights, &comm, options);
      CHECK(created.ok()) << created.status().ToString();
      outputs[rank].bytes_read = model.weights.bytes_read() - read_before;
      executor = std::move(created).value();
    }
    outputs[rank].weight_bytes = executor->weight_bytes();
    outputs[rank].logits = PrefillThenDecode(*executor, tokens, 6, Iota(0, 4));
    GenerateOptions generate;
    generate.max_tokens = 64;
    generate.ignore_eos = true;
    generate.seq_id = 2;
    auto generated = LocalGenerate(*executor, {tokens.begin(), tokens.begin() + 3}, generate);
    CHECK(generated.ok()) << generated.status().ToString();
    outputs[rank].greedy = generated->token_ids;
  });
  return outputs;
}

TEST(TensorParallelTest, AnyDegreeMatchesSingleRank) {
  RandomLlama model = Model();
  const std::vector<int32_t> tokens = RandomTokens(12, model.config.vocab_size, 4);
  const std::vector<RankOutput> single = RunGroup(model, 1, tokens);
  const int64_t total_bytes = model.weights.total_bytes();
  EXPECT_EQ(single[0].weight_bytes, total_bytes);
  ASSERT_EQ(single[0].greedy.size(), 64u);

  for (int tp : {2, 3, 4}) {
    const std::vector<RankOutput> group = RunGroup(model, tp, tokens);
    for (int rank = 0; rank < tp; ++rank) {
      const RankOutput& out = group[rank];
      ASSERT_EQ(out.logits.size(), single[0].logits.size());
      for (size_t step = 0; step < out.logits.size(); ++step) {
        EXPECT_LE(RelativeError(out.logits[step], single[0].logits[step]), 1e-4) << "tp " << tp << " step " << step;
        EXPECT_EQ(out.logits[step], group[0].logits[step]) << "ranks disagree, tp " << tp;
      }
      EXPECT_EQ(out.greedy, single[0].greedy) << "tp " << tp << " rank " << rank;
      // A rank reads exactly what it keeps, and keeps about 1/TP of the model: the margin covers the
      // replicated norms, KV heads replicated where a kv group straddles ranks, and uneven head counts.
      EXPECT_EQ(out.bytes_read, out.weight_bytes);
      EXPECT_LE(out.weight_bytes, total_bytes / tp * 1.4) << "tp " << tp << " rank " << rank;
      EXPECT_GE(out.weight_bytes, total_bytes / tp * 0.7) << "tp " << tp << " rank " << rank;
      std::cerr << "tp " << tp << " rank " << rank << ": " << out.weight_bytes << " of " << total_bytes
                << " weight bytes (" << static_cast<double>(out.weight_bytes) * tp / total_bytes << " x 1/TP)\n";
    }
  }
}

}  // namespace
}  // namespace tpserve::testing
