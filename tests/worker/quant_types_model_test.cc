// A synthetic Llama model in each 5-bit and K-quant type, written by tpserve-mkmodel's writer and loaded
// as it is (the Q4_K_M mix holds Q4_K, Q6_K and the Q5_0 fallback of rows that are not whole
// super-blocks side by side): logits within tolerance of the float64 reference on the same
// dequantised weights, and bitwise equal at TP 1, 2 and 4 (the row-parallel sums are fixed point; the
// shard plan splits attn_output every 4 heads and ffn_down on super-blocks).
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "model/gguf_file.h"
#include "model/synthetic_model.h"
#include "tests/testing/reference_llama.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

struct TypeCase {
  DType type;
  bool medium_mix;
  int ffn_size;
  double tolerance;  // relative to max |logit|: the weights are exact, activations are rounded to Q8 blocks
};

std::string CaseName(const TypeCase& c) { return std::string(DTypeName(c.type)) + (c.medium_mix ? "_M" : ""); }

// Logits of every step of PrefillThenDecode at `tp_size` ranks (rank 0's; the ranks' are checked equal).
std::vector<std::vector<float>> RunAtDegree(const ModelConfig& config, const WeightSource& weights, int tp_size,
                                            const std::vector<int32_t>& tokens) {
  std::vector<std::vector<std::vector<float>>> per_rank(tp_size);
  ThreadGroup group(tp_size);
  group.Run([&](Communicator& comm) {
    ExecutorOptions options;
    options.tp_rank = comm.rank();
    options.tp_size = tp_size;
    options.block_size = 4;
    options.num_kv_blocks = 16;
    options.num_threads = 1;
    auto executor = ModelExecutor::Create(config, weights, &comm, options);
    CHECK(executor.ok()) << executor.status().ToString();
    per_rank[comm.rank()] = PrefillThenDecode(**executor, tokens, 5, Iota(0, 4));
  });
  for (int r = 1; r < tp_size; ++r) EXPECT_EQ(per_rank[r], per_rank[0]) << "ranks disagree at tp " << tp_size;
  return per_rank[0];
}

class QuantTypesModelTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(QuantTypesModelTest, MatchesFloat64ReferenceAndEveryDegreeBitwise) {
  const TypeCase& tc = GetParam();
  SyntheticModelOptions options;
  ModelConfig& c = options.config;
  c.num_layers = 2;
  c.hidden_size = 512;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.ffn_size = tc.ffn_size;
  c.vocab_size = 300;
  c.context_length = 64;
  c.bos_id = 1;
  c.eos_id = 2;
  options.type = tc.type;
  options.medium_mix = tc.medium_mix;
  options.seed = 5;
  const std::string path = ::testing::TempDir() + "/tpserve_quant_types_" + std::to_string(getpid()) + "_" +
                           CaseName(tc) + ".gguf";
  ASSERT_TRUE(WriteSyntheticGguf(options, path).ok());
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto config = ModelConfigFromGguf(**gguf);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ((*gguf)->Find("blk.0.attn_q.weight")->type, tc.type);
  if (IsKQuant(tc.type)) {  // a slice inside a super-block is refused, naming the block
    auto inside = (*gguf)->ReadSlice("blk.0.attn_output.weight", 0, 1, 0, 128);
    EXPECT_EQ(inside.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(inside.status().message().find("multiples of 256"), std::string::npos) << inside.status().ToString();
  }

  const std::vector<int32_t> tokens = RandomTokens(9, c.vocab_size, 3);
  const std::vector<std::vector<float>> single = RunAtDegree(*config, **gguf, 1, tokens);
  auto ref = ReferenceLlama::Load(*config, **gguf);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<double> expected = ref->Forward(tokens);
  double worst = 0.0;
  for (size_t i = 0; i < single.size(); ++i) {
    const size_t t = 4 + i;
    const std::vector<double> row(expected.begin() + t * c.vocab_size, expected.begin() + (t + 1) * c.vocab_size);
    worst = std::max(worst, RelativeError(single[i], row));
  }
  EXPECT_LE(worst, tc.tolerance) << CaseName(tc);
  std::cerr << CaseName(tc) << ": max |logit - float64 reference| / max |logit| = " << worst << "\n";
  for (int tp : {2, 4}) {
    if (tp == 4 && IsKQuant((*gguf)->Find("blk.0.attn_output.weight")->type)) {
      // 8 heads of 64 are 2 super-blocks of attn_output: TP 4 is refused, naming the type.
      ThreadGroup group(4);
      group.Run([&](Communicator& comm) {
        auto plan = ShardPlan::Make(*config, comm.rank(), 4, RowParallelBlocks::Of(**gguf, config->num_layers));
        EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(plan.status().message().find("256-value blocks"), std::string::npos) << plan.status().ToString();
      });
      continue;
    }
    EXPECT_EQ(RunAtDegree(*config, **gguf, tp, tokens), single) << CaseName(tc) << " tp " << tp;
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantTypesModelTest,
                         ::testing::Values(TypeCase{DType::kQ5_0, false, 768, 3e-2},
                                           TypeCase{DType::kQ5_1, false, 768, 3e-2},
                                           TypeCase{DType::kQ2_K, false, 768, 3e-2},
                                           TypeCase{DType::kQ3_K, false, 768, 3e-2},
                                           TypeCase{DType::kQ4_K, false, 768, 3e-2},
                                           TypeCase{DType::kQ5_K, false, 768, 3e-2},
                                           TypeCase{DType::kQ6_K, false, 768, 3e-2},
                                           TypeCase{DType::kQ4_K, true, 544, 3e-2}),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace tpserve::testing
