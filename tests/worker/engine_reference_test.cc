// The engine against the independent float64 reference (tests/testing/reference_llama), on random
// models of several attention shapes, and each weight type against the F32 model made from its
// dequantised weights.
#include <gtest/gtest.h>

#include "tests/testing/reference_llama.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

struct Shape {
  const char* name;
  int heads, kv_heads, head_dim, hidden;
  RopeLayout layout;
};

class EngineReferenceTest : public ::testing::TestWithParam<Shape> {};

// Prefill of 5 tokens then 6 decodes; every position's logits within 1e-4 of the reference.
TEST_P(EngineReferenceTest, MatchesFloat64Reference) {
  const Shape& s = GetParam();
  RandomLlamaShape shape;
  shape.num_heads = s.heads;
  shape.num_kv_heads = s.kv_heads;
  shape.head_dim = s.head_dim;
  shape.hidden_size = s.hidden;
  shape.ffn_size = 96;
  shape.vocab_size = 101;
  shape.rope_layout = s.layout;
  shape.seed = 11;
  RandomLlama model = MakeRandomLlama(shape);
  auto ref = ReferenceLlama::Load(model.config, model.weights);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  const std::vector<int32_t> tokens = RandomTokens(11, shape.vocab_size, 3);
  const std::vector<double> expected = ref->Forward(tokens);  // [T, V]
  LocalEngine engine = MakeLocalEngine(model.config, model.weights);
  const int prefill = 5;
  auto logits = PrefillThenDecode(*engine.executor, tokens, prefill, Iota(0, 4));
  ASSERT_EQ(logits.size(), tokens.size() - prefill + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t t = prefill - 1 + i;
    const std::vector<double> row(expected.begin() + t * shape.vocab_size, expected.begin() + (t + 1) * shape.vocab_size);
    EXPECT_LE(RelativeError(logits[i], row), 1e-4) << s.name << " position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EngineReferenceTest,
                         ::testing::Values(Shape{"mha_4_4", 4, 4, 64, 128, RopeLayout::kInterleaved},
                                           Shape{"gqa_8_4", 8, 4, 64, 128, RopeLayout::kHalf},
                                           Shape{"gqa_8_2", 8, 2, 64, 96, RopeLayout::kInterleaved},
                                           Shape{"gqa_9_3", 9, 3, 64, 96, RopeLayout::kHalf},
                                           Shape{"gqa_4_2_d128", 4, 2, 128, 128, RopeLayout::kInterleaved},
                                           Shape{"mha_2_2_d128", 2, 2, 128, 64, RopeLayout::kHalf}),
                         [](const auto& info) { return std::string(info.param.name); });

struct TypeCase {
  DType type;
  // relative, from the weight format and the activations' rounding: Q8 (quantised types), bf16 (BF16; README
  // "Decisions": 1.5-2.8e-3 measured; below 1e-4 before BF16 took bf16 activations)
  double tolerance;
};

class WeightTypeTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(WeightTypeTest, MatchesDequantizedF32Model) {
  RandomLlamaShape shape;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 32;
  shape.hidden_size = 64;
  shape.ffn_size = 96;
  shape.vocab_size = 101;
  shape.type = GetParam().type;
  shape.embd_type = GetParam().type;
  shape.seed = 5;
  RandomLlama quantised = MakeRandomLlama(shape);
  MemoryWeightSource dequantised = quantised.weights.Dequantized();

  const std::vector<int32_t> tokens = RandomTokens(9, shape.vocab_size, 8);
  LocalEngine q_engine = MakeLocalEngine(quantised.config, quantised.weights);
  LocalEngine f_engine = MakeLocalEngine(quantised.config, dequantised);
  auto q_logits = PrefillThenDecode(*q_engine.executor, tokens, 4, Iota(0, 3));
  auto f_logits = PrefillThenDecode(*f_engine.executor, tokens, 4, Iota(0, 3));
  ASSERT_EQ(q_logits.size(), f_logits.size());
  for (size_t i = 0; i < q_logits.size(); ++i) {
    const double err = RelativeError(q_logits[i], f_logits[i]);
    EXPECT_LE(err, GetParam().tolerance) << DTypeName(GetParam().type) << " step " << i;
    if (GetParam().type == DType::kF32) {
      EXPECT_EQ(q_logits[i], f_logits[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, WeightTypeTest,
                         ::testing::Values(TypeCase{DType::kF32, 0}, TypeCase{DType::kF16, 1e-4},
                                           TypeCase{DType::kBF16, 1e-2}, TypeCase{DType::kQ8_0, 3e-2},
                                           TypeCase{DType::kQ4_0, 3e-2}, TypeCase{DType::kQ4_1, 3e-2}),
                         [](const auto& info) { return std::string(DTypeName(info.param.type)); });

}  // namespace
}  // namespace tpserve::testing
