// Helpers shared by the engine tests: executors over random in-memory models, single-sequence steps,
// and error measures.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "comm/communicator.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "tests/testing/memory_weight_source.h"
#include "worker/model_executor.h"

namespace tpserve::testing {

// Owns a local communicator and the executor built on it.
struct LocalEngine {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<ModelExecutor> executor;
};

inline LocalEngine MakeLocalEngine(const ModelConfig& config, const WeightSource& weights, int block_size = 4,
                                   int64_t num_blocks = 64, int num_threads = 2, DType kv_dtype = DType::kF32) {
  LocalEngine engine;
  engine.comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.block_size = block_size;
  options.num_kv_blocks = num_blocks;
  options.num_threads = num_threads;
  options.kv_dtype = kv_dtype;
  auto executor = ModelExecutor::Create(config, weights, engine.comm.get(), options);
  CHECK(executor.ok()) << executor.status().ToString();
  engine.executor = std::move(executor).value();
  return engine;
}

// Writes a synthetic preset's GGUF (tpserve-mkmodel's writer) with `type` weights and opens it; `tag`
// keeps concurrent tests' files apart. The file is removed at once (the open descriptor keeps it).
inline std::unique_ptr<ModelFile> OpenSyntheticGguf(const std::string& preset, DType type, uint64_t seed,
                                                    const std::string& tag) {
  SyntheticModelOptions o;
  auto config = SyntheticPreset(preset);
  CHECK(config.ok()) << config.status().ToString();
  o.config = *config;
  o.type = type;
  o.seed = seed;
  const std::string path = ::testing::TempDir() + "/tpserve_" + tag + "_" + std::to_string(getpid()) + ".gguf";
  Status written = WriteSyntheticGguf(o, path);
  CHECK(written.ok()) << written.ToString();
  auto file = ModelFile::Open(path);
  CHECK(file.ok()) << file.status().ToString();
  std::filesystem::remove(path);
  return std::move(file).value();
}

// The quantised model of the batch-invariance, verification and drafting tests: Q8_0 matrices, 6 query
// and 3 KV heads of 32 (whole Q8_0 blocks per head, so TP slices fall on blocks), hidden 96, vocabulary 211.
inline RandomLlama MakeQ8Llama(uint64_t seed) {
  RandomLlamaShape shape;
  shape.num_heads = 6;
  shape.num_kv_heads = 3;
  shape.head_dim = 32;
  shape.hidden_size = 96;
  shape.vocab_size = 211;
  shape.type = DType::kQ8_0;
  shape.seed = seed;
  return MakeRandomLlama(shape);
}

// Seeded sampling through every filter and penalty, with top logprobs.
inline SamplingParams SeededSamplingWithPenalties() {
  SamplingParams s;
  s.temperature = 0.9f;
  s.top_k = 50;
  s.top_p = 0.95f;
  s.repetition_penalty = 1.2f;
  s.frequency_penalty = 0.3f;
  s.presence_penalty = 0.2f;
  s.seed = 1234;
  s.num_logprobs = 3;
  return s;
}

// Greedy decoding with a repetition penalty (its penalty tokens matter, its draws do not).
inline SamplingParams GreedyWithPenalty() {
  SamplingParams s;
  s.repetition_penalty = 1.3f;
  return s;
}

// Rank comm.rank()'s executor in a ThreadGroup (tests/testing/thread_communicator.h) test of TP degrees:
// blocks of 4 tokens, one kernel thread.
inline std::unique_ptr<ModelExecutor> MakeRankExecutor(const ModelConfig& config, const WeightSource& weights,
                                                       Communicator& comm, int64_t num_kv_blocks,
                                                       DType kv_dtype = DType::kF32) {
  ExecutorOptions options;
  options.tp_rank = comm.rank();
  options.tp_size = comm.size();
  options.block_size = 4;
  options.num_kv_blocks = num_kv_blocks;
  options.num_threads = 1;
  options.kv_dtype = kv_dtype;
  auto executor = ModelExecutor::Create(config, weights, &comm, options);
  CHECK(executor.ok()) << executor.status().ToString();
  return std::move(executor).value();
}

// A sequence's share of a step that wants the full logits after its last token.
inline SequencePlan SeqStep(uint64_t seq_id, int32_t num_cached, std::vector<int32_t> tokens,
                            std::vector<int32_t> block_table, bool needs_token = true) {
  SequencePlan seq;
  seq.seq_id = seq_id;
  seq.num_cached = num_cached;
  seq.token_ids = std::move(tokens);
  seq.block_table = std::move(block_table);
  seq.needs_token = needs_token;
  return seq;
}

inline std::vector<int32_t> Iota(int32_t begin, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

inline std::vector<int32_t> RandomTokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|
template <typename A, typename B>
double RelativeError(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// Runs one step with return_logits and returns the result; fails the test on error.
inline StepResult RunStep(ModelExecutor& executor, std::vector<SequencePlan> seqs, uint64_t step_id = 0) {
  StepPlan plan;
  plan.step_id = step_id;
  plan.sequences = std::move(seqs);
  plan.return_logits = true;
  auto result = executor.Execute(plan);
  CHECK(result.ok()) << result.status().ToString();
  return std::move(result).value();
}

// Logits [T][V] at every position: prefill of tokens[0..prefill) then one decode step per token,
// blocks from `block_table`.
inline std::vector<std::vector<float>> PrefillThenDecode(ModelExecutor& executor, const std::vector<int32_t>& tokens,
                                                         int prefill, const std::vector<int32_t>& block_table,
                                                         uint64_t seq_id = 7) {
  std::vector<std::vector<float>> logits;
  StepResult first = RunStep(executor, {SeqStep(seq_id, 0, {tokens.begin(), tokens.begin() + prefill}, block_table)});
  logits.push_back(first.sequences.at(0).logits);
  for (size_t t = prefill; t < tokens.size(); ++t) {
    StepResult step = RunStep(executor, {SeqStep(seq_id, static_cast<int32_t>(t), {tokens[t]}, block_table)});
    logits.push_back(step.sequences.at(0).logits);
  }
  return logits;
}

}  // namespace tpserve::testing
