// tpserve-bench-naive: the floor that the KV cache lifts. Generates O tokens greedily for one prompt
// on one rank (ModelExecutor, TP 1) two ways:
//  - with the KV cache: one prefill of the P prompt tokens, then O−1 decode steps of one token each;
//  - without it: every step re-runs the whole prefix (P + i tokens) as a fresh prefill into the same
//    scratch blocks (num_cached = 0), keeping only the last row's token: O(N·(P+N)) tokens of work.
// Prints both tok/s, their ratio, the tokens each way processed (the napkin-math ratio the measured
// one is compared with), and whether both produced the same tokens.
//
//   tpserve-bench-naive [--model M] [--prompt-len P] [--output-len O] [--threads N] [--seed S]
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/command_line.h"
#include "model/model_file.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

struct Flags {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int prompt_len = 32, output_len = 32, threads = 0;
  uint64_t seed = 1;
};

constexpr int kBlockSize = 16;

using Clock = std::chrono::steady_clock;

// One step of one sequence: tokens at positions [num_cached, num_cached + tokens.size()).
StatusOr<int32_t> Step(ModelExecutor* executor, const std::vector<int32_t>& tokens, int32_t num_cached,
                       uint64_t step_id) {
  StepPlan plan;
  plan.step_id = step_id;
  SequencePlan seq;
  seq.seq_id = 1;
  seq.num_cached = num_cached;
  seq.token_ids = tokens;
  const int32_t num_blocks = (num_cached + static_cast<int32_t>(tokens.size()) + kBlockSize - 1) / kBlockSize;
  for (int32_t b = 0; b < num_blocks; ++b) seq.block_table.push_back(b);
  seq.needs_token = true;
  plan.sequences.push_back(std::move(seq));
  ASSIGN_OR_RETURN(StepResult result, executor->Execute(plan));
  if (result.sequences.size() != 1) return Internal("expected one sampled row");
  return result.sequences[0].token_id;
}

int Main(int argc, char** argv) {
  Flags f;
  CommandLine app("tpserve-bench-naive: greedy generation on one rank with the KV cache and without it (the whole "
               "prefix re-run every step): both tok/s, their ratio and the napkin-math ratio.",
               "tpserve-bench-naive");
  app.add_option("--model", f.model, "GGUF file or Hugging Face directory")->capture_default_str();
  app.add_option("--prompt-len", f.prompt_len, "prompt tokens (random ids)")->check(CLI::Range(1, 4095))
      ->capture_default_str();
  app.add_option("--output-len", f.output_len, "generated tokens")->check(CLI::Range(1, 4095))->capture_default_str();
  app.add_option("--threads", f.threads, "kernel threads (0: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--seed", f.seed, "seed of the prompt ids")->capture_default_str();
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  if (f.prompt_len < 1 || f.output_len < 1 || f.threads < 0 || f.prompt_len + f.output_len > 4096) {
    std::fprintf(stderr, "tpserve-bench-naive: need 1 <= prompt-len, output-len and their sum <= 4096\n");
    return 1;
  }
  StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(f.model);
  if (!model.ok()) {
    std::fprintf(stderr, "tpserve-bench-naive: %s\n", model.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.num_threads = f.threads;
  options.block_size = kBlockSize;
  options.kv_memory_bytes = int64_t{64} << 20;  // plenty: the sequence uses blocks 0..(P+O)/16
  StatusOr<std::unique_ptr<ModelExecutor>> executor = ModelExecutor::Create(**model, comm.get(), options);
  if (!executor.ok()) {
    std::fprintf(stderr, "tpserve-bench-naive: %s\n", executor.status().ToString().c_str());
    return 1;
  }
  const int vocab = (*executor)->config().vocab_size;
  std::mt19937_64 rng(f.seed);
  std::vector<int32_t> prompt(f.prompt_len);  // [P] random ids past the special tokens
  for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(32, vocab - 1)(rng);

  // Warm-up (page in weights, spin up threads): one short prefill.
  if (!Step(executor->get(), {prompt[0]}, 0, 0).ok()) return 1;

  auto run = [&](bool use_cache, std::vector<int32_t>* out, int64_t* tokens_processed) -> StatusOr<double> {
    std::vector<int32_t> seq = prompt;  // prompt + generated
    out->clear();
    *tokens_processed = 0;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < f.output_len; ++i) {
      int32_t token = 0;
      if (use_cache && i > 0) {  // decode: only the newest token, the rest is in the cache
        ASSIGN_OR_RETURN(token, Step(executor->get(), {seq.back()}, static_cast<int32_t>(seq.size()) - 1, i + 1));
        *tokens_processed += 1;
      } else {  // prefill of everything so far (the first step of both ways, every step without the cache)
        ASSIGN_OR_RETURN(token, Step(executor->get(), seq, 0, i + 1));
        *tokens_processed += static_cast<int64_t>(seq.size());
      }
      out->push_back(token);
      seq.push_back(token);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<int32_t> cached_tokens, naive_tokens;
  int64_t cached_work = 0, naive_work = 0;
  StatusOr<double> cached_s = run(true, &cached_tokens, &cached_work);
  StatusOr<double> naive_s = run(false, &naive_tokens, &naive_work);
  if (!cached_s.ok() || !naive_s.ok()) {
    std::fprintf(stderr, "tpserve-bench-naive: step failed: %s\n",
                 (cached_s.ok() ? naive_s.status() : cached_s.status()).ToString().c_str());
    return 1;
  }
  int same = 0;
  while (same < f.output_len && cached_tokens[same] == naive_tokens[same]) ++same;
  const double cached_rate = f.output_len / *cached_s, naive_rate = f.output_len / *naive_s;
  std::printf("naive generation floor: %s, TP 1, prompt %d tokens, %d output tokens (greedy), %d threads\n",
              f.model.c_str(), f.prompt_len, f.output_len, f.threads);
  std::printf("  with KV cache    : %8.1f ms  %8.2f tok/s  (%lld tokens through the model)\n", *cached_s * 1e3,
              cached_rate, static_cast<long long>(cached_work));
  std::printf("  without KV cache : %8.1f ms  %8.2f tok/s  (%lld tokens through the model)\n", *naive_s * 1e3,
              naive_rate, static_cast<long long>(naive_work));
  std::printf("  speedup from the cache: %.2fx measured; %.2fx more tokens processed without it\n",
              cached_rate / naive_rate, static_cast<double>(naive_work) / static_cast<double>(cached_work));
  std::printf("  identical leading tokens: %d of %d\n", same, f.output_len);
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
