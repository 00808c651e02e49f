// MergedColumnParallelLinear against separate ColumnParallelLinear layers (the layout before merging):
// every part's output bitwise equal for every stored type, token count, thread count and row slice; the
// stack holds exactly the separate slices' bytes; only runs of one type share a matrix. Then whole models
// (Q4_1 and F32, TP 1, 2 and 3 on in-process ranks): logits bitwise equal with and without merging.
#include "worker/merged_column_parallel_linear.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"
#include "worker/parallel_linear.h"

namespace tpserve::testing {
namespace {

constexpr int64_t kIn = 96;  // in_features, a multiple of the quantisation block

std::vector<float> RandomValues(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Case {
  std::vector<MergedColumnParallelLinear::Part> parts;
  std::vector<DType> types;  // stored type of each part's tensor
};

MemoryWeightSource Weights(const Case& c) {
  MemoryWeightSource weights;
  for (size_t i = 0; i < c.parts.size(); ++i) {
    const auto& part = c.parts[i];
    weights.Add(part.name, c.types[i], {part.out_features, kIn}, RandomValues(part.out_features * kIn, 100 + i));
  }
  return weights;
}

// Q, K, V of a 6/3-head layer with head dim 16, this rank's rows given by [begin, end) per part.
Case Qkv(DType type, int64_t q_begin, int64_t q_end, int64_t kv_begin, int64_t kv_end) {
  return Case{{{"q", 96, q_begin, q_end}, {"k", 48, kv_begin, kv_end}, {"v", 48, kv_begin, kv_end}},
              {type, type, type}};
}

// Checks merged against separate layers on `weights` for several T and pool sizes; returns the merged layer.
MergedColumnParallelLinear ExpectSameAsSeparate(const Case& c, const MemoryWeightSource& weights) {
  auto merged = MergedColumnParallelLinear::Load(weights, c.parts, kIn);
  CHECK(merged.ok()) << merged.status().ToString();
  std::vector<WeightSlice> separate;  // each part's rows on their own, multiplied by MatMul
  int64_t separate_bytes = 0;
  for (const auto& part : c.parts) {
    auto slice = WeightSlice::Load(weights, part.name, part.out_features, kIn, part.row_begin, part.row_end, 0, kIn);
    CHECK(slice.ok()) << slice.status().ToString();
    separate_bytes += slice->bytes();
    separate.push_back(std::move(slice).value());
  }
  EXPECT_EQ(merged->bytes(), separate_bytes);
  EXPECT_EQ(merged->num_parts(), static_cast<int>(c.parts.size()));
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t num_tokens : {1, 2, 3, 5, 8, 33}) {
      const std::vector<float> x = RandomValues(num_tokens * kIn, 7 + num_tokens);  // [T, kIn]
      std::vector<std::vector<float>> got(c.parts.size()), want(c.parts.size());
      std::vector<float*> outs;
      for (size_t i = 0; i < c.parts.size(); ++i) {
        const int64_t rows = c.parts[i].row_end - c.parts[i].row_begin;
        EXPECT_EQ(merged->out_shard(static_cast<int>(i)), rows);
        got[i].assign(num_tokens * rows, -1.0f);  // [T, rows]
        want[i].assign(num_tokens * rows, -1.0f);
        outs.push_back(got[i].data());
        if (rows > 0) MatMul(separate[i].matrix(), x.data(), num_tokens, want[i].data(), &pool);
      }
      merged->Forward(x.data(), num_tokens, outs, &pool);
      for (size_t i = 0; i < c.parts.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << c.parts[i].name << " " << DTypeName(c.types[i]) << " T " << num_tokens
                                   << " threads " << threads;
      }
    }
  }
  return std::move(merged).value();
}

TEST(MergedColumnParallelLinearTest, EveryTypeAndSliceBitwiseEqualsSeparateLayers) {
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    // Whole matrices (TP 1), a middle slice (a rank of TP 3), and a rank whose K/V slice is empty.
    for (const Case& c : {Qkv(type, 0, 96, 0, 48), Qkv(type, 32, 64, 16, 32), Qkv(type, 80, 96, 48, 48)}) {
      SCOPED_TRACE(DTypeName(type));
      const MemoryWeightSource weights = Weights(c);
      EXPECT_EQ(ExpectSameAsSeparate(c, weights).num_matrices(), 1);
    }
  }
}

TEST(MergedColumnParallelLinearTest, OnlyRunsOfOneTypeShareAMatrix) {
  struct Mixed {
    std::vector<DType> types;
    int num_matrices;
  };
  for (const Mixed& m : {Mixed{{DType::kQ4_1, DType::kQ4_1, DType::kQ8_0}, 2},
                         Mixed{{DType::kQ8_0, DType::kQ4_1, DType::kQ8_0}, 3},
                         Mixed{{DType::kF32, DType::kF16, DType::kF16}, 2}}) {
    Case c = Qkv(DType::kF32, 16, 80, 0, 32);
    c.types = m.types;
    const MemoryWeightSource weights = Weights(c);
    EXPECT_EQ(ExpectSameAsSeparate(c, weights).num_matrices(), m.num_matrices);
  }
}

TEST(MergedColumnParallelLinearTest, UnmergedKeepsOneMatrixPerPart) {
  const Case c = Qkv(DType::kQ4_1, 0, 96, 0, 48);
  const MemoryWeightSource weights = Weights(c);
  auto unmerged = MergedColumnParallelLinear::Load(weights, c.parts, kIn, /*merge=*/false);
  ASSERT_TRUE(unmerged.ok()) << unmerged.status().ToString();
  EXPECT_EQ(unmerged->num_matrices(), 3);
  EXPECT_EQ(unmerged->bytes(), ExpectSameAsSeparate(c, weights).bytes());
}

TEST(MergedColumnParallelLinearTest, MissingOrMisshapenPartIsAnError) {
  Case c = Qkv(DType::kQ8_0, 0, 96, 0, 48);
  const MemoryWeightSource weights = Weights(c);
  c.parts[2].name = "absent";
  EXPECT_EQ(MergedColumnParallelLinear::Load(weights, c.parts, kIn).status().code(), StatusCode::kNotFound);
  c.parts[2] = {"v", 64, 0, 48};  // v is [48, kIn]
  EXPECT_EQ(MergedColumnParallelLinear::Load(weights, c.parts, kIn).status().code(), StatusCode::kDataLoss);
}

// Whole models: logits at every position of a prefill-then-decode run, merged vs unmerged, on every rank.
std::vector<std::vector<std::vector<float>>> RankLogits(RandomLlama& model, int tp_size, bool merge, int poll_us) {
  const std::vector<int32_t> tokens = RandomTokens(12, model.config.vocab_size, 5);
  std::vector<std::vector<std::vector<float>>> logits(tp_size);  // [rank][position][V]
  ThreadGroup group(tp_size);
  group.Run([&](Communicator& comm) {
    ExecutorOptions options;
    options.tp_rank = comm.rank();
    options.tp_size = tp_size;
    options.block_size = 4;
    options.num_kv_blocks = 16;
    options.num_threads = tp_size == 1 ? 2 : 1;
    options.poll_us = poll_us;
    options.merge_column_parallel = merge;
    auto executor = ModelExecutor::Create(model.config, model.weights, &comm, options);
    CHECK(executor.ok()) << executor.status().ToString();
    logits[comm.rank()] = PrefillThenDecode(**executor, tokens, 5, Iota(0, 4));
  });
  return logits;
}

TEST(MergedColumnParallelLinearTest, ModelLogitsBitwiseEqualUnmergedAtTp1To3) {
  for (DType type : {DType::kQ4_1, DType::kF32}) {
    RandomLlamaShape shape;
    shape.num_heads = 6;
    shape.num_kv_heads = 3;
    shape.head_dim = 32;
    shape.hidden_size = 96;
    shape.ffn_size = 160;
    shape.vocab_size = 103;
    shape.type = type;
    shape.embd_type = type == DType::kQ4_1 ? DType::kQ8_0 : DType::kF32;
    shape.seed = 21;
    RandomLlama model = MakeRandomLlama(shape);
    for (int tp : {1, 2, 3}) {
      const auto unmerged = RankLogits(model, tp, /*merge=*/false, /*poll_us=*/0);
      const auto merged = RankLogits(model, tp, /*merge=*/true, /*poll_us=*/50);
      ASSERT_EQ(merged.size(), unmerged.size());
      for (int rank = 0; rank < tp; ++rank) {
        ASSERT_EQ(merged[rank].size(), 8u);
        for (size_t p = 0; p < merged[rank].size(); ++p) {
          EXPECT_EQ(merged[rank][p], unmerged[rank][p])
              << DTypeName(type) << " TP " << tp << " rank " << rank << " position " << p;
        }
      }
    }
  }
}

// Resident weight bytes per rank do not change with merging.
TEST(MergedColumnParallelLinearTest, WeightBytesUnchanged) {
  RandomLlamaShape shape;
  shape.num_heads = 6;
  shape.num_kv_heads = 3;
  shape.head_dim = 32;
  shape.hidden_size = 96;
  shape.type = DType::kQ4_1;
  RandomLlama model = MakeRandomLlama(shape);
  for (int tp : {1, 3}) {
    std::vector<int64_t> bytes[2];
    for (bool merge : {false, true}) {
      bytes[merge].resize(tp);
      ThreadGroup group(tp);
      group.Run([&](Communicator& comm) {
        ExecutorOptions options;
        options.tp_rank = comm.rank();
        options.tp_size = tp;
        options.num_kv_blocks = 4;
        options.num_threads = 1;
        options.merge_column_parallel = merge;
        auto executor = ModelExecutor::Create(model.config, model.weights, &comm, options);
        CHECK(executor.ok()) << executor.status().ToString();
        bytes[merge][comm.rank()] = (*executor)->weight_bytes();
      });
    }
    EXPECT_EQ(bytes[true], bytes[false]) << "TP " << tp;
  }
}

}  // namespace
}  // namespace tpserve::testing
