// A sequence's logits are bitwise identical whether it runs alone or batched with other prefills and
// decodes, wherever its blocks sit in the pool, and however its prefill is chunked; for a random Llama
// and for the synthetic Gemma 3 file (biases aside, every architecture feature: per-head norms, post
// norms, GELU, sliding windows of 4 keys crossing the prefill chunks).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

// Q8_0 matrices: the quantised path too (activation quantisation is per token).
RandomLlama Model() { return MakeQ8Llama(/*seed=*/4); }

constexpr int kBlockSize = 4;

void ExpectAloneEqualsBatchedShuffledAndChunked(const ModelConfig& config, const WeightSource& weights,
                                                DType kv_dtype = DType::kF32) {
  const std::vector<int32_t> a = RandomTokens(13, config.vocab_size, 1);  // prefill 10, decode 3
  const std::vector<int32_t> b = RandomTokens(9, config.vocab_size, 2);
  const std::vector<int32_t> c = RandomTokens(6, config.vocab_size, 3);

  // Alone, contiguous blocks, one prefill chunk, two threads.
  LocalEngine alone = MakeLocalEngine(config, weights, kBlockSize, 32, 2, kv_dtype);
  const auto expected = PrefillThenDecode(*alone.executor, a, 10, Iota(0, 4));

  // Batched, on one thread, with A's blocks shuffled among the others' and its prefill in chunks of 3 + 7.
  LocalEngine batched = MakeLocalEngine(config, weights, kBlockSize, 32, 1, kv_dtype);
  std::vector<int32_t> free_list = Iota(0, 32);
  std::mt19937_64 rng(17);
  std::shuffle(free_list.begin(), free_list.end(), rng);
  const std::vector<int32_t> a_blocks(free_list.begin(), free_list.begin() + 4);
  const std::vector<int32_t> b_blocks(free_list.begin() + 4, free_list.begin() + 8);
  const std::vector<int32_t> c_blocks(free_list.begin() + 8, free_list.begin() + 12);

  // Step 0: C prefills 5 tokens; A's first chunk (no token wanted).
  RunStep(*batched.executor, {SeqStep(3, 0, {c.begin(), c.begin() + 5}, c_blocks),
                              SeqStep(1, 0, {a.begin(), a.begin() + 3}, a_blocks, false)});
  // Step 1: B prefills, C decodes, A's second chunk.
  StepResult step1 = RunStep(*batched.executor, {SeqStep(2, 0, {b.begin(), b.begin() + 8}, b_blocks),
                                                 SeqStep(3, 5, {c[5]}, c_blocks),
                                                 SeqStep(1, 3, {a.begin() + 3, a.begin() + 10}, a_blocks)});
  ASSERT_EQ(step1.sequences.size(), 3u);
  EXPECT_EQ(step1.sequences[2].seq_id, 1u);
  EXPECT_EQ(step1.sequences[2].logits, expected[0]) << "prefill logits differ";
  // Decodes of A interleaved with B's decode, A listed first then last.
  for (int i = 0; i < 3; ++i) {
    std::vector<SequencePlan> seqs = {SeqStep(1, 10 + i, {a[10 + i]}, a_blocks), SeqStep(2, 8 + (i > 0 ? 1 : 0), {b[8]}, b_blocks)};
    if (i % 2 == 1) std::swap(seqs[0], seqs[1]);
    StepResult step = RunStep(*batched.executor, seqs);
    const SequenceResult& result = step.sequences[i % 2 == 1 ? 1 : 0];
    ASSERT_EQ(result.seq_id, 1u);
    EXPECT_EQ(result.logits, expected[1 + i]) << "decode " << i;
    EXPECT_EQ(result.token_id, static_cast<int32_t>(std::max_element(expected[1 + i].begin(), expected[1 + i].end()) -
                                                    expected[1 + i].begin()));
  }
}

TEST(BatchInvarianceTest, AloneEqualsBatchedShuffledAndChunked) {
  const RandomLlama model = Model();
  ExpectAloneEqualsBatchedShuffledAndChunked(model.config, model.weights);
}

// Every KV cache type: the rounding happens once, at the write, so batching cannot change it.
TEST(BatchInvarianceTest, EveryKvTypeAloneEqualsBatchedShuffledAndChunked) {
  const RandomLlama model = Model();
  for (DType kv_dtype : {DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(kv_dtype));
    ExpectAloneEqualsBatchedShuffledAndChunked(model.config, model.weights, kv_dtype);
  }
}

TEST(BatchInvarianceTest, Gemma3AloneEqualsBatchedShuffledAndChunked) {
  SyntheticModelOptions options;
  options.config = *SyntheticPreset("gemma3-tiny");
  options.type = DType::kQ8_0;
  const std::string path = ::testing::TempDir() + "/tpserve_batch_gemma3_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(WriteSyntheticGguf(options, path).ok());
  auto file = ModelFile::Open(path);
  std::filesystem::remove(path);  // the open file keeps its descriptor
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ExpectAloneEqualsBatchedShuffledAndChunked((*file)->config(), (*file)->weights());
}

}  // namespace
}  // namespace tpserve::testing
