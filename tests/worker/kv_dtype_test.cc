// KV caches of every element type (ExecutorOptions::kv_dtype): the engine's logits beside the float64
// reference (which keeps K/V in float64: the difference is the type's rounding, bounded per type),
// the type really applied (its logits differ from the f32 cache's), and every TP degree bitwise the same
// for each type. Batch invariance per type: batch_invariance_test.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/testing/reference_llama.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

// 6 query heads over 3 KV heads of 64 (q8_0's rows are two of its 32-value blocks); TP 1, 2, 3 shard them.
RandomLlama Model() {
  RandomLlamaShape shape;
  shape.num_layers = 3;
  shape.num_heads = 6;
  shape.num_kv_heads = 3;
  shape.head_dim = 64;
  shape.hidden_size = 128;
  shape.ffn_size = 192;
  shape.vocab_size = 257;
  shape.seed = 8;
  return MakeRandomLlama(shape);
}

struct KvTypeCase {
  DType type;
  double tolerance;  // relative to the float64 reference, over 24 positions (about twice what was measured)
};

class KvDtypeTest : public ::testing::TestWithParam<KvTypeCase> {};

std::vector<std::vector<float>> Logits(const RandomLlama& model, DType kv_dtype, const std::vector<int32_t>& tokens) {
  LocalEngine engine = MakeLocalEngine(model.config, model.weights, 4, 16, 2, kv_dtype);
  return PrefillThenDecode(*engine.executor, tokens, 9, Iota(0, 8));
}

TEST_P(KvDtypeTest, LogitsAgreeWithTheFloat64ReferenceWithinTheTypesRounding) {
  const RandomLlama model = Model();
  const std::vector<int32_t> tokens = RandomTokens(32, model.config.vocab_size, 3);
  auto ref = ReferenceLlama::Load(model.config, model.weights);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<double> expected = ref->Forward(tokens);
  const auto logits = Logits(model, GetParam().type, tokens);
  const int64_t V = model.config.vocab_size;
  double worst = 0, mean = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t t = 8 + i;
    const std::vector<double> row(expected.begin() + t * V, expected.begin() + (t + 1) * V);
    const double e = RelativeError(logits[i], row);
    worst = std::max(worst, e);
    mean += e / static_cast<double>(logits.size());
  }
  std::printf("KV %s: relative error to the float64 reference mean %.2e max %.2e\n", DTypeName(GetParam().type), mean,
              worst);
  EXPECT_LE(worst, GetParam().tolerance);
  if (GetParam().type != DType::kF32) {
    EXPECT_NE(logits, Logits(model, DType::kF32, tokens)) << "the cache type changed nothing";
  }
}

TEST_P(KvDtypeTest, EveryTensorParallelDegreeIsBitwiseTp1) {
  const RandomLlama model = Model();
  const std::vector<int32_t> tokens = RandomTokens(20, model.config.vocab_size, 4);
  std::vector<std::vector<float>> single;
  for (int tp : {1, 2, 3}) {
    std::vector<std::vector<std::vector<float>>> per_rank(tp);
    ThreadGroup group(tp);
    group.Run([&](Communicator& comm) {
      per_rank[comm.rank()] =
          PrefillThenDecode(*MakeRankExecutor(model.config, model.weights, comm, 16, GetParam().type), tokens, 7,
                            Iota(0, 5));
    });
    if (tp == 1) single = per_rank[0];
    for (int rank = 0; rank < tp; ++rank) EXPECT_EQ(per_rank[rank], single) << "tp " << tp << " rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, KvDtypeTest,
                         ::testing::Values(KvTypeCase{DType::kF32, 1e-6}, KvTypeCase{DType::kF16, 3e-4},
                                           KvTypeCase{DType::kBF16, 2e-3}, KvTypeCase{DType::kQ8_0, 5e-3}),
                         [](const auto& info) { return std::string(DTypeName(info.param.type)); });

TEST(KvDtypeOptionsTest, AnUnsupportedTypeOrHeadDimIsInvalidArgument) {
  const RandomLlama model = Model();
  auto comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.kv_dtype = DType::kQ4_0;
  auto q4 = ModelExecutor::Create(model.config, model.weights, comm.get(), options);
  ASSERT_FALSE(q4.ok());
  EXPECT_EQ(q4.status().code(), StatusCode::kInvalidArgument);
  RandomLlamaShape odd;
  odd.head_dim = 16;  // not a q8_0 block
  const RandomLlama small = MakeRandomLlama(odd);
  options.kv_dtype = DType::kQ8_0;
  auto q8 = ModelExecutor::Create(small.config, small.weights, comm.get(), options);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseKvDType("BF16").ok());
  EXPECT_EQ(ParseKvDType("q4_0").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve::testing
