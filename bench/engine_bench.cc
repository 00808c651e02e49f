// tpserve-bench-engine: the real ModelExecutor on a model file — prefill tokens/s for one prompt
// (llama-bench pp512), decode tokens/s at batch 1 (tg-like) and at batch B (B sequences decoding
// together, each with its own KV blocks), and the decode step split into compute and all-reduce —
// each printed beside this machine's limit measured in the same run:
//   decode:  STREAM triad GB/s ÷ (weight bytes of all ranks + KV bytes read per step) → tokens/s bound
//   prefill: matmul peak GFLOP/s ÷ FLOPs per token: the project's MatMul at T=512 in the arithmetic of the model's
//            matrices (PeakTypeOf: Q8_0 for the quantised types, F32 for F32 and F16, BF16 for BF16).
// Both limits are measured on the cores the run uses (its ranks × threads per rank, at most the host's):
// one thread cannot stream more than one core's bandwidth, so a 1-thread run is held to a 1-core triad.
// --tp N (N > 1) re-executes under `mpirun -np N` (as tpserve-run --tp does) after measuring the
// limits; rank 0 drives a GroupLeader, the other ranks serve its steps.
//
//   tpserve-bench-engine --model FILE [--tp N] [--tp-label TEXT] [--batches 1,8,32] [--prompt 512]
//                        [--decode-steps 32] [--threads N] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/cpu_time.h"
#include "bench/stream_triad.h"
#include "comm/communicator.h"
#include "common/command_line.h"
#include "common/dtype.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "model/model_file.h"
#include "worker/group_launch.h"
#include "worker/group_process.h"
#include "worker/group_runtime.h"
#include "worker/model_executor.h"
#include "worker/step_executor.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Flags {
  std::string model;
  int tp = 1;
  std::string tp_label;
  std::vector<int> batches = {1, 8, 32};
  int prompt = 512;
  int decode_steps = 32;
  int context = 16;  // prompt per decoding sequence: decode starts near an empty context, as tg128 does
  std::string kv_dtype = "f32";
  int threads = 0;
  std::string json;
  double triad_gbs = 0;    // measured by the launching process (0: measure here)
  std::string peak_type;   // the type whose MatMul peak bounds prefill (PeakTypeOf), set with matmul_gflops
  double matmul_gflops = 0;
};

// The cores the run uses: its ranks × threads per rank (--threads, else the rank's default: TPSERVE_THREADS
// or the host's cores over the ranks), at most the host's.
int LimitThreads(const Flags& f) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int per_rank = f.threads;
  if (per_rank <= 0) per_rank = f.tp == 1 ? ThreadPool::DefaultThreads() : std::max(1, cores / f.tp);
  return std::clamp(f.tp * per_rank, 1, cores);
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--model", f.model, "GGUF file or Hugging Face directory")->required();
  app.add_option("--tp", f.tp, "tensor-parallel ranks (> 1: re-runs itself under mpirun)")->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--tp-label", f.tp_label, "the label of this run in the output (default TP<N>)");
  app.add_option("--batches", f.batches, "decode batch sizes: 1,8,32")->delimiter(',')->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--prompt", f.prompt, "prefill prompt tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--decode-steps", f.decode_steps, "decode steps per batch size")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--context", f.context, "prompt tokens of each decoding sequence")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--kv-dtype", f.kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}))->capture_default_str();
  app.add_option("--threads", f.threads, "kernel threads per rank (0: cores / ranks)")->check(CLI::Range(0, 1024));
  app.add_option("--json", f.json, "also write the results as JSON here");
  // Set by the launching process for the ranks it re-executes under mpirun (hidden).
  app.add_option("--triad-gbs", f.triad_gbs)->group("");
  app.add_option("--matmul-gflops", f.matmul_gflops)->group("");
  app.add_option("--peak-type", f.peak_type)->group("");
}

// The type whose MatMul peak bounds a model's prefill: the arithmetic its matrices take in the project's MatMul.
// Every quantised type is an int8 dot with the tokens' Q8 activations, Q8_0's MatMul the fastest of them; F32
// and F16 weights take f32 fmas (F32's MatMul: an F32 model held to the int8 dot's peak would need more than the
// F32 FMA peak itself); BF16 its pairs of products (f32 fmas below avx512bf16). The type holding most of the
// file's matrix bytes decides.
StatusOr<DType> PeakTypeOf(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(path));
  std::map<DType, uint64_t> bytes;
  for (const std::string& name : model->weights().Names()) {
    const TensorInfo* t = model->weights().Find(name);
    if (t != nullptr && t->shape.size() == 2) bytes[t->type] += t->nbytes;
  }
  if (bytes.empty()) return DataLoss(path + ": no matrices");
  const DType most = std::max_element(bytes.begin(), bytes.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  if (IsQuantized(most)) return DType::kQ8_0;
  return most == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

// Best GFLOP/s of the project's MatMul at T=512 on `type` weights 2048x2048: the prefill ceiling this code can
// reach on this machine in that arithmetic, measured rather than taken from a datasheet.
double MeasureMatMulPeakGflops(ThreadPool* pool, DType type) {
  constexpr int64_t kRows = 2048, kCols = 2048, kTokens = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(kTokens * kCols);  // [T, cols]
  std::vector<float> y(kTokens * kRows);  // [T, rows]
  std::vector<float> src(kCols);          // [cols] one weight row before quantisation
  for (float& v : x) v = dist(rng);
  const int64_t row_bytes = DTypeRowBytes(type, kCols);
  std::vector<uint8_t> w(row_bytes * kRows);  // [rows, row_bytes] in `type`
  for (int64_t r = 0; r < kRows; ++r) {
    for (float& v : src) v = dist(rng);
    QuantizeRow(type, src.data(), w.data() + r * row_bytes, kCols);
  }
  const WeightMatrix matrix{type, kRows, kCols, w.data()};
  double best = 1e30;
  for (int rep = 0; rep < 8; ++rep) {  // best of 8: fewer reps left the peak below what a model's prefill reached
    const auto t0 = Clock::now();
    MatMul(matrix, x.data(), kTokens, y.data(), pool);
    best = std::min(best, Seconds(t0));
  }
  return 2.0 * kRows * kCols * kTokens / best / 1e9;
}

// Multiply-adds per token of the weight matrices (the LM head counted once per sampled token).
struct ModelCounts {
  double layer_params = 0;   // all layers' matrices
  double lm_head_params = 0;
  double kv_bytes_per_position = 0;  // K and V of every layer, every KV head, in the cache's type
};

ModelCounts Count(const ModelConfig& c, DType kv_dtype) {
  ModelCounts m;
  const double h = c.hidden_size, qd = double(c.num_heads) * c.head_dim, kvd = double(c.num_kv_heads) * c.head_dim;
  m.layer_params = c.num_layers * (h * qd + 2 * h * kvd + qd * h + 3 * h * c.ffn_size);
  m.lm_head_params = double(c.vocab_size) * h;
  m.kv_bytes_per_position =
      c.num_layers * 2.0 * c.num_kv_heads * static_cast<double>(KvPool::RowBytes(c.head_dim, kv_dtype));
  return m;
}

struct DecodeFigure {
  int batch = 0;
  double tok_s = 0, step_ms = 0, compute_ms = 0, allreduce_ms = 0, cpu_tok_s = 0;
  double bytes_per_step = 0, bound_tok_s = 0;
  bool is_compute_bound = false;
};

// Runs the benchmark through `execute` (rank 0's view of the group) and prints / returns the figures.
class EngineBench {
 public:
  EngineBench(const Flags& flags, const ModelConfig& config, int64_t num_blocks, int block_size,
              double weight_bytes_all_ranks, double weight_bytes_rank0)
      : flags_(flags), config_(config), num_blocks_(num_blocks), block_size_(block_size),
        weight_bytes_(weight_bytes_all_ranks), weight_bytes_rank0_(weight_bytes_rank0),
        counts_(Count(config, *ParseKvDType(flags.kv_dtype))) {}

  Status Run(const std::function<StatusOr<StepResult>(const StepPlan&)>& execute) {
    execute_ = execute;
    std::printf("model %s: L=%d hidden=%d heads=%d/%d D=%d FFN=%d V=%d; %s, %d threads/rank\n", flags_.model.c_str(),
                config_.num_layers, config_.hidden_size, config_.num_heads, config_.num_kv_heads, config_.head_dim,
                config_.ffn_size, config_.vocab_size, flags_.tp_label.c_str(), threads_);
    std::printf("weights: %.1f MB all ranks (%.1f MB on rank 0); %.1f M matrix params; KV %.1f KB/position\n",
                weight_bytes_ / 1e6, weight_bytes_rank0_ / 1e6, (counts_.layer_params + counts_.lm_head_params) / 1e6,
                counts_.kv_bytes_per_position / 1e3);
    std::printf("limits: STREAM triad %.2f GB/s, %s matmul peak %.1f GFLOP/s (measured on the %d core(s) this run "
                "uses)\n", flags_.triad_gbs, flags_.peak_type.c_str(), flags_.matmul_gflops, LimitThreads(flags_));
    RETURN_IF_ERROR(Prefill());
    for (int b : flags_.batches) RETURN_IF_ERROR(Decode(b));
    return OkStatus();
  }

  void set_threads(int t) { threads_ = t; }

  std::string Json() const {
    char buf[1024];
    std::string out = "{\n";
    std::snprintf(buf, sizeof(buf),
                  "  \"model\": \"%s\", \"tp\": %d, \"tp_label\": \"%s\", \"threads_per_rank\": %d,\n"
                  "  \"weight_bytes\": %.0f, \"weight_bytes_rank0\": %.0f, \"params\": %.0f,\n"
                  "  \"triad_gbs\": %.3f, \"matmul_peak_gflops\": %.2f, \"matmul_peak_type\": \"%s\", "
                  "\"kv_dtype\": \"%s\", "
                  "\"decode_context\": %d,\n",
                  flags_.model.c_str(), flags_.tp, flags_.tp_label.c_str(), threads_, weight_bytes_,
                  weight_bytes_rank0_, counts_.layer_params + counts_.lm_head_params, flags_.triad_gbs,
                  flags_.matmul_gflops, flags_.peak_type.c_str(), flags_.kv_dtype.c_str(), flags_.context);
    out += buf;
    std::snprintf(buf, sizeof(buf),
                  "  \"prefill\": {\"tokens\": %d, \"tok_s\": %.3f, \"gflops\": %.3f, \"bound_tok_s\": %.3f, "
                  "\"fraction\": %.4f, \"allreduce_ms\": %.3f, \"step_ms\": %.3f, \"flops_per_token\": %.0f},\n"
                  "  \"decode\": [",
                  flags_.prompt, prefill_tok_s_, prefill_gflops_, prefill_bound_, prefill_tok_s_ / prefill_bound_,
                  prefill_allreduce_ms_, prefill_ms_, prefill_flops_per_token_);
    out += buf;
    for (size_t i = 0; i < decode_.size(); ++i) {
      const DecodeFigure& d = decode_[i];
      std::snprintf(buf, sizeof(buf),
                    "%s\n    {\"batch\": %d, \"tok_s\": %.3f, \"step_ms\": %.4f, \"compute_ms\": %.4f, "
                    "\"allreduce_ms\": %.4f, \"allreduce_share\": %.4f, \"cpu_tok_s\": %.3f, \"bytes_per_step\": %.0f, "
                    "\"gbs\": %.3f, \"bound_tok_s\": %.3f, \"fraction\": %.4f, \"gflops\": %.3f, "
                    "\"flops_per_token\": %.0f, \"bound\": \"%s\"}",
                    i ? "," : "", d.batch, d.tok_s, d.step_ms, d.compute_ms, d.allreduce_ms,
                    d.allreduce_ms / d.step_ms, d.cpu_tok_s, d.bytes_per_step, d.bytes_per_step / d.step_ms / 1e6,
                    d.bound_tok_s, d.tok_s / d.bound_tok_s, FlopsPerDecodeToken() * d.tok_s / 1e9, FlopsPerDecodeToken(),
                    d.is_compute_bound ? "compute" : "memory");
      out += buf;
    }
    out += "\n  ]\n}\n";
    return out;
  }

 private:
  double FlopsPerDecodeToken() const { return 2.0 * (counts_.layer_params + counts_.lm_head_params); }

  // Sequence s gets blocks [first_block, first_block + blocks) — disjoint per sequence.
  SequencePlan MakeSequence(uint64_t id, const std::vector<int32_t>& tokens, int32_t first_block, int num_positions) {
    SequencePlan seq;
    seq.seq_id = id;
    seq.token_ids = tokens;
    seq.needs_token = true;
    const int blocks = (num_positions + block_size_ - 1) / block_size_;
    for (int b = 0; b < blocks; ++b) seq.block_table.push_back(first_block + b);
    return seq;
  }

  std::vector<int32_t> RandomTokens(int n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % config_.vocab_size);
    return ids;
  }

  Status Prefill() {
    const int n = flags_.prompt;
    if ((n + block_size_ - 1) / block_size_ > num_blocks_) return OutOfRange("prompt does not fit the KV blocks");
    double best = 1e30, best_allreduce = 0;
    for (int rep = 0; rep < 2; ++rep) {
      StepPlan plan;
      plan.step_id = step_id_++;
      plan.sequences.push_back(MakeSequence(1000 + rep, RandomTokens(n, rep + 1), 0, n));
      const auto t0 = Clock::now();
      ASSIGN_OR_RETURN(StepResult result, execute_(plan));
      const double sec = Seconds(t0);
      if (sec < best) {
        best = sec;
        best_allreduce = result.allreduce_ms;
      }
    }
    const double flops_per_token =
        2.0 * counts_.layer_params + 4.0 * config_.num_layers * config_.num_heads * config_.head_dim * (n / 2.0) +
        2.0 * counts_.lm_head_params / n;
    prefill_flops_per_token_ = flops_per_token;
    prefill_ms_ = best * 1e3;
    prefill_allreduce_ms_ = best_allreduce;
    prefill_tok_s_ = n / best;
    prefill_gflops_ = prefill_tok_s_ * flops_per_token / 1e9;
    prefill_bound_ = flags_.matmul_gflops * 1e9 / flops_per_token;
    std::printf("prefill pp%d: %.1f tok/s (%.1f GFLOP/s, all-reduce %.1f of %.1f ms); bound %.1f tok/s "
                "(%.1f GFLOP/s %s matmul peak / %.2f GFLOP per token) -> %.0f%%\n",
                n, prefill_tok_s_, prefill_gflops_, best_allreduce, prefill_ms_, prefill_bound_, flags_.matmul_gflops,
                flags_.peak_type.c_str(), flops_per_token / 1e9, 100.0 * prefill_tok_s_ / prefill_bound_);
    return OkStatus();
  }

  // B sequences, each with a short prompt (prefilled together), then decode steps of B tokens.
  Status Decode(int batch) {
    const int kContext = flags_.context;
    const int steps = flags_.decode_steps;
    const int positions = kContext + steps + 1;
    const int blocks_per_seq = (positions + block_size_ - 1) / block_size_;
    if (int64_t{blocks_per_seq} * batch > num_blocks_) {
      return OutOfRange("batch " + std::to_string(batch) + " does not fit the KV blocks");
    }
    StepPlan plan;
    plan.step_id = step_id_++;
    for (int s = 0; s < batch; ++s) {
      plan.sequences.push_back(
          MakeSequence(2000 + s, RandomTokens(kContext, 100 + s), s * blocks_per_seq, positions));
    }
    ASSIGN_OR_RETURN(StepResult prefill, execute_(plan));
    for (int s = 0; s < batch; ++s) {
      plan.sequences[s].num_cached = kContext;
      plan.sequences[s].token_ids = {prefill.sequences[s].token_id};
    }
    double total = 0, compute = 0, allreduce = 0;
    const double cpu0 = bench::ProcessCpuSeconds();
    for (int step = 0; step < steps; ++step) {
      plan.step_id = step_id_++;
      const auto t0 = Clock::now();
      ASSIGN_OR_RETURN(StepResult result, execute_(plan));
      total += Seconds(t0);
      compute += result.compute_ms - result.allreduce_ms;
      allreduce += result.allreduce_ms;
      for (int s = 0; s < batch; ++s) {
        plan.sequences[s].num_cached += 1;
        plan.sequences[s].token_ids = {result.sequences[s].token_id};
        plan.sequences[s].sample_index += 1;
      }
    }
    const double cpu = bench::ProcessCpuSeconds() - cpu0;
    DecodeFigure d;
    d.batch = batch;
    d.step_ms = total * 1e3 / steps;
    d.tok_s = batch * steps / total;
    d.compute_ms = compute / steps;
    d.allreduce_ms = allreduce / steps;
    // Rank 0's CPU time over its threads: the rate if rank 0 had its cores to itself.
    d.cpu_tok_s = batch * steps / (cpu / std::max(1, threads_));
    const double mean_context = kContext + steps / 2.0;
    d.bytes_per_step = weight_bytes_ + batch * mean_context * counts_.kv_bytes_per_position;
    // The roofline: the weights (and KV) stream once per step, the FLOPs grow with the batch; the lower
    // of the two bounds holds (batch 1 is far left of the ridge, large batches may cross it).
    const double memory_bound = batch * flags_.triad_gbs * 1e9 / d.bytes_per_step;
    const double compute_bound = flags_.matmul_gflops * 1e9 / FlopsPerDecodeToken();
    d.is_compute_bound = compute_bound < memory_bound;
    d.bound_tok_s = std::min(memory_bound, compute_bound);
    decode_.push_back(d);
    char why[160];
    if (d.is_compute_bound) {
      std::snprintf(why, sizeof(why), "%.1f GFLOP/s %s matmul peak / %.2f GFLOP per token", flags_.matmul_gflops,
                    flags_.peak_type.c_str(), FlopsPerDecodeToken() / 1e9);
    } else {
      std::snprintf(why, sizeof(why), "%.2f GB/s triad / %.1f MB per step of %d", flags_.triad_gbs,
                    d.bytes_per_step / 1e6, batch);
    }
    std::printf("decode B=%d: %.1f tok/s (step %.2f ms = compute %.2f + all-reduce %.2f, %.0f%%); bound %.1f tok/s "
                "(%s) -> %.0f%%  [rank-0 cpu-time basis %.1f tok/s]\n",
                batch, d.tok_s, d.step_ms, d.compute_ms, d.allreduce_ms, 100.0 * d.allreduce_ms / d.step_ms,
                d.bound_tok_s, why, 100.0 * d.tok_s / d.bound_tok_s, d.cpu_tok_s);
    return OkStatus();
  }

  const Flags& flags_;
  const ModelConfig& config_;
  int64_t num_blocks_;
  int block_size_;
  double weight_bytes_, weight_bytes_rank0_;
  ModelCounts counts_;
  int threads_ = 1;
  std::function<StatusOr<StepResult>(const StepPlan&)> execute_;
  uint64_t step_id_ = 0;
  double prefill_ms_ = 0, prefill_allreduce_ms_ = 0, prefill_tok_s_ = 0, prefill_gflops_ = 0, prefill_bound_ = 0;
  double prefill_flops_per_token_ = 0;
  std::vector<DecodeFigure> decode_;
};

Status WriteJson(const Flags& flags, const EngineBench& bench) {
  if (flags.json.empty()) return OkStatus();
  std::ofstream out(flags.json);
  out << bench.Json();
  if (!out) return Internal("cannot write " + flags.json);
  return OkStatus();
}

ExecutorOptions Options(const Flags& flags) {
  ExecutorOptions options;
  options.num_threads = flags.threads;
  const int max_batch = *std::max_element(flags.batches.begin(), flags.batches.end());
  const int64_t blocks_for_decode = int64_t{max_batch} * ((flags.context + flags.decode_steps + 1 + 15) / 16);
  options.num_kv_blocks = std::max<int64_t>(blocks_for_decode, (flags.prompt + 15) / 16) + 4;
  options.kv_dtype = *ParseKvDType(flags.kv_dtype);
  return options;
}

Status RunBench(const Flags& flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model));
  ExecutorOptions options = Options(flags);
  if (flags.tp == 1 && !IsMpiLaunched()) {
    std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor, ModelExecutor::Create(*model, comm.get(), options));
    const double bytes = static_cast<double>(executor->weight_bytes());
    EngineBench bench(flags, model->config(), executor->num_kv_blocks(), executor->block_size(), bytes, bytes);
    bench.set_threads(options.num_threads > 0 ? options.num_threads : ThreadPool::DefaultThreads());
    RETURN_IF_ERROR(bench.Run([&](const StepPlan& plan) { return executor->Execute(plan); }));
    return WriteJson(flags, bench);
  }
  float bytes_sum = 0;  // every rank's weight bytes, summed in make (all ranks call it together)
  double bytes_rank0 = 0;
  int threads = 1;
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ExecutorOptions rank_options = options;
    rank_options.tp_rank = comm->rank();
    rank_options.tp_size = comm->size();
    if (rank_options.num_threads == 0) rank_options.num_threads = DefaultThreadsPerRank();
    threads = rank_options.num_threads;
    ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor, ModelExecutor::Create(*model, comm, rank_options));
    bytes_rank0 = static_cast<double>(executor->weight_bytes());
    bytes_sum = static_cast<float>(executor->weight_bytes());
    RETURN_IF_ERROR(comm->AllReduceSum(&bytes_sum, 1));
    const int64_t num_blocks = executor->num_kv_blocks();
    std::shared_ptr<ModelExecutor> shared = std::move(executor);
    return LoadedShard{
        std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) { return shared->Execute(plan); }),
        num_blocks};
  };
  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    EngineBench bench(flags, model->config(), info.num_kv_blocks, options.block_size, bytes_sum, bytes_rank0);
    bench.set_threads(threads);
    RETURN_IF_ERROR(bench.Run([&](const StepPlan& plan) { return group.Execute(plan); }));
    return WriteJson(flags, bench);
  };
  return RunGroup(make, lead);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  using namespace tpserve;
  CommandLine app("tpserve-bench-engine: the real ModelExecutor on a model file: prefill and decode tokens/s "
                  "(batch 1 and B) and the decode step's all-reduce share, beside this machine's measured limits.",
                  "tpserve-bench-engine");
  Flags flags;
  AddFlags(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  if (flags.tp_label.empty()) flags.tp_label = "TP" + std::to_string(flags.tp);
  if (!IsMpiLaunched() && (flags.triad_gbs <= 0 || flags.matmul_gflops <= 0)) {
    // The limits of the cores this run uses (the ranks of a TP group share them).
    ThreadPool pool(LimitThreads(flags));
    if (flags.triad_gbs <= 0) flags.triad_gbs = bench::MeasureTriadGbs(&pool, 5);
    if (flags.matmul_gflops <= 0) {
      StatusOr<DType> type = PeakTypeOf(flags.model);
      if (!type.ok()) {
        std::fprintf(stderr, "tpserve-bench-engine: %s\n", type.status().ToString().c_str());
        return 1;
      }
      flags.peak_type = DTypeName(*type);
      flags.matmul_gflops = MeasureMatMulPeakGflops(&pool, *type);
    }
  }
  if (flags.tp > 1 && !IsMpiLaunched()) {
    // Hand the measured limits to the ranks, then become mpirun.
    std::vector<std::string> args(argv, argv + argc);
    args.push_back("--triad-gbs");
    args.push_back(std::to_string(flags.triad_gbs));
    args.push_back("--matmul-gflops");
    args.push_back(std::to_string(flags.matmul_gflops));
    args.push_back("--peak-type");
    args.push_back(flags.peak_type);
    std::vector<char*> new_argv;
    for (std::string& a : args) new_argv.push_back(a.data());
    new_argv.push_back(nullptr);
    Status status = ReexecUnderMpirun(flags.tp, static_cast<int>(args.size()), new_argv.data());
    std::fprintf(stderr, "tpserve-bench-engine: %s\n", status.ToString().c_str());
    return 1;
  }
  if (IsMpiLaunched()) {
    return RunMpiProcess(&argc, &argv, "tpserve-bench-engine", [&] { return RunBench(flags); });
  }
  Status status = RunBench(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "tpserve-bench-engine: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
