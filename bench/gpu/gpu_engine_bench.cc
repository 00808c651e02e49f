// tpserve-bench-gpu-engine: the CUDA executor (one GPU, TP 1) on a model file, beside the GPU's
// HBM roofline:
//   decode at batch B: B sequences of `context` cached tokens decode `steps` tokens together;
//     bytes per step = weight bytes read (every matrix once, the LM head included) + KV bytes read
//     (K and V of every cached position of every sequence in every layer);
//     roofline fraction = bytes per step ÷ step time ÷ peak bandwidth (--peak-gbs, H200: 4800).
//   prefill: one `prompt`-token sequence (llama-bench pp512): tokens/s, TFLOP/s of its matmuls and
//     attention, and its bytes ÷ time against the same bandwidth.
// Step times are wall times of StepExecutor::Execute (host sampling and the logits copy included),
// the median of the timed repetitions after warm-ups.
//
//   tpserve-bench-gpu-engine --model FILE [--label NAME] [--batches 1,8,32,64] [--context 128]
//                            [--steps 32] [--prompt 512] [--peak-gbs 4800] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/command_line.h"
#include "common/status.h"
#include "model/model_file.h"
#include "worker/cuda/cuda_executor.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string model;
  std::string label;
  std::vector<int> batches = {1, 8, 32, 64};
  int context = 128;
  int steps = 32;
  int prompt = 512;
  double peak_gbs = 4800;
  std::string json;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--model", f.model, "GGUF file or Hugging Face directory")->required();
  app.add_option("--label", f.label, "the run's label in the output");
  app.add_option("--batches", f.batches, "decode batch sizes: 1,8,32,64")->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--context", f.context, "cached tokens per decoding sequence")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--steps", f.steps, "timed decode steps")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--prompt", f.prompt, "prefill prompt tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--peak-gbs", f.peak_gbs, "the GPU's HBM bandwidth (H200: 4800)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", f.json, "also write the results as JSON here");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct DecodePoint {
  int batch = 0;
  double step_ms = 0;
  double tokens_per_s = 0;
  double weight_bytes = 0;  // per step
  double kv_bytes = 0;      // per step
  double achieved_gbs = 0;
  double fraction = 0;
};

struct PrefillPoint {
  int tokens = 0;
  double ms = 0;
  double tokens_per_s = 0;
  double tflops = 0;
  double achieved_gbs = 0;
  double fraction = 0;
};

class Bench {
 public:
  Bench(const Flags& flags, CudaExecutor* executor) : flags_(flags), executor_(executor) {
    const ModelConfig& c = executor->config();
    kv_bytes_per_position_ = 2.0 * c.num_layers * executor->shard().num_kv_heads() * c.head_dim * sizeof(float);
  }

  StatusOr<PrefillPoint> Prefill() {
    const ModelConfig& c = executor_->config();
    SequencePlan seq = Sequence(1, RandomTokens(flags_.prompt, 1), 0, PrefillBlocks());
    std::vector<double> times;
    for (int rep = 0; rep < 4; ++rep) {  // one warm-up, three timed
      StepPlan plan;
      plan.step_id = next_step_++;
      plan.sequences = {seq};
      const auto start = Clock::now();
      ASSIGN_OR_RETURN(StepResult result, executor_->Execute(plan));
      if (rep > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    PrefillPoint point;
    point.tokens = flags_.prompt;
    const double seconds = Median(times);
    point.ms = seconds * 1e3;
    point.tokens_per_s = flags_.prompt / seconds;
    // Matmul FLOPs: 2 · (layer matrix elements) per token, the LM head for the one sampled row;
    // attention: QK and PV, 2 · 2 · H · D per (token, key) pair, T(T+1)/2 pairs per layer.
    const double q_rows = double{1} * c.num_heads * c.head_dim, kv_rows = double{1} * c.num_kv_heads * c.head_dim;
    const double layer_elements = c.hidden_size * (2 * q_rows + 2 * kv_rows) + 3.0 * c.hidden_size * c.ffn_size;
    const double T = flags_.prompt;
    const double flops = 2.0 * layer_elements * c.num_layers * T + 2.0 * c.hidden_size * c.vocab_size +
                         4.0 * c.num_heads * c.head_dim * (T * (T + 1) / 2) * c.num_layers;
    point.tflops = flops / seconds / 1e12;
    const double bytes = executor_->weight_bytes_per_step() + kv_bytes_per_position_ * (T * (T + 1) / 2);
    point.achieved_gbs = bytes / seconds / 1e9;
    point.fraction = point.achieved_gbs / flags_.peak_gbs;
    return point;
  }

  StatusOr<DecodePoint> Decode(int batch) {
    // Each sequence gets its own blocks after the prefill benchmark's.
    std::vector<SequencePlan> seqs;
    for (int s = 0; s < batch; ++s) {
      seqs.push_back(Sequence(100 + s, RandomTokens(flags_.context, 10 + s), PrefillBlocks() + BlocksPerSequence() * s,
                              BlocksPerSequence()));
    }
    StepPlan prefill;
    prefill.step_id = next_step_++;
    prefill.sequences = seqs;
    ASSIGN_OR_RETURN(StepResult first, executor_->Execute(prefill));
    std::vector<double> times;
    const int warmup = 2;
    for (int step = 0; step < warmup + flags_.steps; ++step) {
      for (int s = 0; s < batch; ++s) {
        seqs[s].num_cached += static_cast<int32_t>(seqs[s].token_ids.size());
        seqs[s].token_ids = {first.sequences[s].token_id};
      }
      StepPlan plan;
      plan.step_id = next_step_++;
      plan.sequences = seqs;
      const auto start = Clock::now();
      ASSIGN_OR_RETURN(first, executor_->Execute(plan));
      if (step >= warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    DecodePoint point;
    point.batch = batch;
    const double seconds = Median(times);
    point.step_ms = seconds * 1e3;
    point.tokens_per_s = batch / seconds;
    point.weight_bytes = static_cast<double>(executor_->weight_bytes_per_step());
    // The middle timed step: every sequence reads context + warm-up + steps/2 + 1 positions.
    point.kv_bytes = kv_bytes_per_position_ * batch * (flags_.context + warmup + flags_.steps / 2 + 1);
    point.achieved_gbs = (point.weight_bytes + point.kv_bytes) / seconds / 1e9;
    point.fraction = point.achieved_gbs / flags_.peak_gbs;
    return point;
  }

  int64_t BlocksPerSequence() const { return CeilDiv(flags_.context + flags_.steps + 4, executor_->block_size()); }
  int64_t PrefillBlocks() const { return CeilDiv(flags_.prompt, executor_->block_size()); }

 private:
  // A sequence holding KV blocks [first_block, first_block + num_blocks).
  static SequencePlan Sequence(uint64_t id, std::vector<int32_t> tokens, int64_t first_block, int64_t num_blocks) {
    SequencePlan seq;
    seq.seq_id = id;
    seq.token_ids = std::move(tokens);
    for (int64_t b = 0; b < num_blocks; ++b) seq.block_table.push_back(static_cast<int32_t>(first_block + b));
    seq.needs_token = true;
    return seq;
  }

  std::vector<int32_t> RandomTokens(int n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, executor_->config().vocab_size - 1);
    std::vector<int32_t> tokens(n);
    for (int32_t& t : tokens) t = dist(rng);
    return tokens;
  }

  const Flags& flags_;
  CudaExecutor* executor_;
  double kv_bytes_per_position_ = 0;  // K and V of one position in every layer
  uint64_t next_step_ = 0;
};

Status Run(const Flags& flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model));
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  const int max_batch = *std::max_element(flags.batches.begin(), flags.batches.end());
  ExecutorOptions options;
  options.num_kv_blocks = CeilDiv(flags.prompt, options.block_size) +
                          max_batch * CeilDiv(flags.context + flags.steps + 4, options.block_size);
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor, CudaExecutor::Create(*model, comm.get(), options));
  const std::string label = flags.label.empty() ? flags.model : flags.label;
  std::printf("%s on %s: %.1f MB of weights read per step, roofline %.0f GB/s\n", label.c_str(),
              executor->device_name().c_str(), executor->weight_bytes_per_step() / 1e6, flags.peak_gbs);
  Bench bench(flags, executor.get());

  ASSIGN_OR_RETURN(PrefillPoint prefill, bench.Prefill());
  std::printf("prefill pp%d: %.1f ms = %.0f tok/s, %.2f TFLOP/s; %.0f GB/s of %.0f (%.1f%% of the bandwidth bound)\n",
              prefill.tokens, prefill.ms, prefill.tokens_per_s, prefill.tflops, prefill.achieved_gbs, flags.peak_gbs,
              100 * prefill.fraction);
  std::vector<DecodePoint> decode;
  for (int batch : flags.batches) {
    ASSIGN_OR_RETURN(DecodePoint point, bench.Decode(batch));
    std::printf("decode batch %3d: %.3f ms/step = %8.0f tok/s; %.1f MB weights + %.1f MB KV per step -> %.0f GB/s "
                "of %.0f = %.1f%% of the roofline\n",
                batch, point.step_ms, point.tokens_per_s, point.weight_bytes / 1e6, point.kv_bytes / 1e6,
                point.achieved_gbs, flags.peak_gbs, 100 * point.fraction);
    decode.push_back(point);
  }

  if (!flags.json.empty()) {
    std::ofstream out(flags.json);
    if (!out) return Unavailable("cannot write " + flags.json);
    char buf[512];
    out << "{\"label\": \"" << label << "\", \"model\": \"" << flags.model << "\", \"device\": \""
        << executor->device_name() << "\", \"tp\": 1, \"peak_gbs\": " << flags.peak_gbs
        << ", \"weight_bytes_per_step\": " << executor->weight_bytes_per_step() << ", \"context\": " << flags.context
        << ", \"steps\": " << flags.steps << ",\n";
    std::snprintf(buf, sizeof(buf),
                  " \"prefill\": {\"tokens\": %d, \"ms\": %.4f, \"tokens_per_s\": %.2f, \"tflops\": %.4f, "
                  "\"achieved_gbs\": %.2f, \"roofline_fraction\": %.5f},\n",
                  prefill.tokens, prefill.ms, prefill.tokens_per_s, prefill.tflops, prefill.achieved_gbs,
                  prefill.fraction);
    out << buf << " \"decode\": [";
    for (size_t i = 0; i < decode.size(); ++i) {
      const DecodePoint& p = decode[i];
      std::snprintf(buf, sizeof(buf),
                    "%s\n  {\"batch\": %d, \"step_ms\": %.4f, \"tokens_per_s\": %.2f, \"weight_bytes\": %.0f, "
                    "\"kv_bytes\": %.0f, \"achieved_gbs\": %.2f, \"roofline_fraction\": %.5f}",
                    i ? "," : "", p.batch, p.step_ms, p.tokens_per_s, p.weight_bytes, p.kv_bytes, p.achieved_gbs,
                    p.fraction);
      out << buf;
    }
    out << "\n ]}\n";
  }
  return OkStatus();
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  tpserve::CommandLine app("tpserve-bench-gpu-engine: the CUDA executor (one GPU, TP 1) on a model file: decode "
                           "tokens/s at batch B and prefill, beside the GPU's HBM roofline.",
                           "tpserve-bench-gpu-engine");
  tpserve::Flags flags;
  tpserve::AddFlags(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  tpserve::Status status = tpserve::Run(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "tpserve-bench-gpu-engine: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
