// The training view equals the inference view: one teacher-forced pass over a whole sequence (logits at
// every position from a single forward), prefill + token-by-token decode through the paged cache, and
// the naive loop that re-runs the whole prefix every step all give the same logits.
#include <gtest/gtest.h>

#include "kvstore/kv_pool.h"
#include "kvstore/slot_mapping.h"
#include "tests/testing/reference_llama.h"
#include "tests/worker/engine_test_util.h"
#include "worker/llama_model.h"

namespace tpserve::testing {
namespace {

// Logits [T, V] of every position from one forward over the whole sequence.
std::vector<float> TeacherForced(const RandomLlama& model, const std::vector<int32_t>& tokens, int block_size) {
  auto shard = ShardPlan::Make(model.config, 0, 1);
  CHECK(shard.ok());
  auto llama = LlamaModel::Load(model.config, model.weights, *shard);
  CHECK(llama.ok()) << llama.status().ToString();
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t num_blocks = (T + block_size - 1) / block_size;
  KvPoolShape kv_shape;
  kv_shape.num_layers = model.config.num_layers;
  kv_shape.num_kv_heads = model.config.num_kv_heads;
  kv_shape.head_dim = model.config.head_dim;
  kv_shape.block_size = block_size;
  kv_shape.num_blocks = num_blocks;
  auto pool = KvPool::Create(kv_shape);
  CHECK(pool.ok());
  std::vector<LayerKvCache> caches;
  for (int l = 0; l < model.config.num_layers; ++l) caches.push_back({(*pool)->KeyCache(l), (*pool)->ValueCache(l)});

  const std::vector<int32_t> block_table = Iota(0, static_cast<int32_t>(num_blocks));
  std::vector<int32_t> positions = Iota(0, static_cast<int32_t>(T));
  std::vector<int32_t> token_seq(T, 0);
  std::vector<int32_t> slots(T);
  CHECK(ComputeSlotMapping(block_table, 0, T, block_size, slots.data()).ok());
  ForwardBatch batch;
  batch.token_ids = tokens.data();
  batch.positions = positions.data();
  batch.token_seq = token_seq.data();
  batch.slot_mapping = slots.data();
  batch.block_tables = block_table.data();
  batch.logit_rows = positions.data();  // every position
  batch.num_tokens = T;
  batch.max_blocks_per_seq = num_blocks;
  batch.num_logit_rows = T;
  batch.block_size = block_size;
  std::vector<float> logits(T * model.config.vocab_size);
  ThreadPool threads(2);
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  CHECK((*llama)->Forward(batch, caches, logits.data(), &threads, *comm).ok());
  return logits;
}

TEST(TrainingViewTest, TeacherForcedEqualsDecodeEqualsNaiveLoop) {
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    RandomLlamaShape shape;
    shape.num_heads = 6;
    shape.num_kv_heads = 2;
    shape.head_dim = 32;
    shape.hidden_size = 96;
    shape.vocab_size = 257;
    shape.rope_layout = layout;
    shape.seed = 21;
    const RandomLlama model = MakeRandomLlama(shape);
    const int V = shape.vocab_size;
    const std::vector<int32_t> tokens = RandomTokens(14, V, 99);
    const int block_size = 4;

    const std::vector<float> forced = TeacherForced(model, tokens, block_size);
    LocalEngine engine = MakeLocalEngine(model.config, model.weights, block_size);
    const auto decoded = PrefillThenDecode(*engine.executor, tokens, 1, Iota(0, 4));  // positions 0..T-1
    ASSERT_EQ(decoded.size(), tokens.size());
    auto ref = ReferenceLlama::Load(model.config, model.weights);
    ASSERT_TRUE(ref.ok());
    const std::vector<double> expected = ref->Forward(tokens);

    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::vector<float> forced_row(forced.begin() + t * V, forced.begin() + (t + 1) * V);
      // The naive loop: a fresh prefill of the whole prefix, nothing reused from earlier steps.
      LocalEngine naive = MakeLocalEngine(model.config, model.weights, block_size);
      StepResult rerun = RunStep(*naive.executor, {SeqStep(3, 0, {tokens.begin(), tokens.begin() + t + 1}, Iota(0, 4))});
      const std::vector<double> ref_row(expected.begin() + t * V, expected.begin() + (t + 1) * V);
      EXPECT_LE(RelativeError(decoded[t], forced_row), 1e-4) << "position " << t;
      EXPECT_LE(RelativeError(rerun.sequences.at(0).logits, forced_row), 1e-4) << "position " << t;
      EXPECT_LE(RelativeError(forced_row, ref_row), 1e-4) << "position " << t;
    }
  }
}

}  // namespace
}  // namespace tpserve::testing
