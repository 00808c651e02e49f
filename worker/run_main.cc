// tpserve-run: local generation on one rank, for debugging and scripting (flags: tpserve-run --help).
//   tpserve-run --model FILE (--prompt TEXT | --prompt-ids 1,2,3) [--max-tokens N] [--temperature T]
//     [--top-k K] [--top-p P] [--seed S] [--ignore-eos] [--print-ids] [--threads N] [--poll US] [--chat]
// --device cuda runs the rank(s) on GPUs (worker/device_executor.h); the default is cpu.
// --tp N (N > 1) re-executes this command under `mpirun -np N` and generates on an N-rank tensor-parallel
// group (rank 0 drives and prints; the other ranks serve its steps; see worker/group_runtime.h).
// With --print-ids the generated ids (not the prompt) go space-separated on one line of stdout;
// otherwise the generated text streams to stdout. Timings go to stderr.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/command_line.h"
#include "kernels/cpu/isa.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/chat_format.h"
#include "model/model_file.h"
#include "model/stream_decoder.h"
#include "model/tokenizer.h"
#include "worker/device_executor.h"
#include "worker/group_launch.h"
#include "worker/group_process.h"
#include "worker/group_runtime.h"
#include "worker/local_generate.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

struct RunFlags {
  std::string model;
  std::string prompt;             // or
  std::vector<int32_t> prompt_ids;
  int max_tokens = 32;
  SamplingParams sampling;
  bool ignore_eos = false;
  bool print_ids = false;
  bool chat = false;
  bool mmap = false;
  bool no_mmap = false;
  int threads = 0;
  int poll_us = -1;  // < 0: ThreadPool::DefaultPollMicros()
  int64_t kv_mb = 256;
  std::string kv_dtype = "f32";
  int tp = 1;
  std::string device_name = "cpu";
  Device device = Device::kCpu;  // from device_name
  bool has_prompt() const { return prompt_ids.empty(); }
};

// Declares the flags on `app`; the CLI11 checks cover ranges and which flags go together.
void AddFlags(CLI::App& app, RunFlags& f) {
  app.add_option("--model", f.model, "GGUF file or Hugging Face safetensors directory")->required();
  CLI::Option_group* prompt = app.add_option_group("prompt", "exactly one of");
  CLI::Option* text = prompt->add_option("--prompt", f.prompt, "prompt text");
  prompt->add_option("--prompt-ids", f.prompt_ids, "prompt as token ids: 1,2,3")
      ->delimiter(',')
      ->check(CLI::Range(0, INT32_MAX));
  prompt->require_option(1);
  app.add_option("--max-tokens", f.max_tokens, "tokens to generate")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("--temperature", f.sampling.temperature, "0: greedy")->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-k", f.sampling.top_k, "0: off")->check(CLI::Range(0, INT32_MAX));
  app.add_option("--top-p", f.sampling.top_p, "1: off")->check(Interval(0, 1, false, true));
  app.add_option("--seed", f.sampling.seed, "sampling seed (any 64-bit value, e.g. one a server reported)");
  app.add_flag("--ignore-eos", f.ignore_eos, "keep generating past EOS");
  app.add_flag("--print-ids", f.print_ids, "print the generated ids space-separated on one line, not the text");
  app.add_flag("--chat", f.chat, "render --prompt as a user turn in the model's chat format")->needs(text);
  app.add_option("--threads", f.threads, "kernel threads per rank (0: cores / ranks)")->check(CLI::Range(0, 1024));
  app.add_option("--poll", f.poll_us, "kernel threads poll for work this many microseconds before sleeping "
                 "(llama.cpp's --poll)")->check(CLI::Range(0, 1000000));
  app.add_option("--kv-mb", f.kv_mb, "KV cache memory per rank in MiB")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  app.add_option("--kv-dtype", f.kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}))->capture_default_str();
  app.add_option("--tp", f.tp, "tensor-parallel ranks (> 1: re-runs itself under mpirun)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--device", f.device_name, "cpu or cuda")->capture_default_str();
  app.add_flag("--mmap", f.mmap, kMmapHelp)->excludes(app.add_flag("--no-mmap", f.no_mmap, kNoMmapHelp));
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelFile& model) {
  if (model.gguf() != nullptr) return Tokenizer::FromGguf(*model.gguf());
  return Tokenizer::FromHfDir(model.hf_dir());
}

// Tokenizes, generates through `execute` and prints (on the driving rank only).
Status Generate(const RunFlags& flags, const ModelFile* model, const StepFunction& execute,
                const GenerateCapacity& capacity) {
  const ModelConfig& config = model->config();
  std::unique_ptr<Tokenizer> tokenizer;
  if (flags.has_prompt() || !flags.print_ids) {
    ASSIGN_OR_RETURN(tokenizer, LoadTokenizer(*model));
  }

  std::vector<int32_t> prompt = flags.prompt_ids;
  int32_t end_of_turn = config.eot_id;  // where a chat answer ends
  if (flags.has_prompt()) {
    std::string text = flags.prompt;
    bool add_bos = config.add_bos;
    if (flags.chat) {
      const ChatFormat format = DetectChatFormat(
          config.chat_template, [&](std::string_view piece) { return tokenizer->TokenId(piece).has_value(); });
      text = RenderChat(format, {ChatMessage{"user", flags.prompt}}, /*add_generation_prompt=*/true);
      add_bos = false;  // as PromptBuilder: a format that starts with BOS (Gemma's <bos>) writes it
      if (std::optional<int32_t> eot = tokenizer->TokenId(EndOfTurnToken(format))) end_of_turn = *eot;
    }
    prompt = tokenizer->Encode(text, add_bos, /*parse_special=*/flags.chat);
  }

  GenerateOptions generate;
  generate.max_tokens = flags.max_tokens;
  generate.sampling = flags.sampling;
  generate.ignore_eos = flags.ignore_eos;
  if (config.eos_id >= 0) generate.stop_ids.push_back(config.eos_id);
  if (end_of_turn >= 0) generate.stop_ids.push_back(end_of_turn);
  std::unique_ptr<StreamDecoder> decoder;
  if (!flags.print_ids) {
    decoder = std::make_unique<StreamDecoder>(*tokenizer);
    generate.on_token = [&](int32_t id) {
      if (!flags.ignore_eos && (id == config.eos_id || id == end_of_turn)) return;
      std::cout << decoder->Push(id) << std::flush;
    };
  }
  ASSIGN_OR_RETURN(GenerateOutput output, LocalGenerate(execute, capacity, prompt, generate));
  if (flags.print_ids) {
    for (size_t i = 0; i < output.token_ids.size(); ++i) std::cout << (i ? " " : "") << output.token_ids[i];
    std::cout << "\n";
  } else {
    std::cout << decoder->Flush() << "\n";
  }
  std::fprintf(stderr, "prompt %zu tokens: prefill %.1f ms (%.1f tok/s); %d decode steps: %.1f ms (%.1f tok/s); %s\n",
               prompt.size(), output.prefill_ms, prompt.size() * 1e3 / std::max(output.prefill_ms, 1e-9),
               output.num_decode_steps, output.decode_ms,
               output.num_decode_steps * 1e3 / std::max(output.decode_ms, 1e-9), output.finish_reason.c_str());
  return OkStatus();
}

Status Run(const RunFlags& flags) {
  RETURN_IF_ERROR(InitIsa().status());
  const WeightLoading loading = WeightLoadingFromFlags(flags.mmap, flags.no_mmap);
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model, loading));
  ExecutorOptions options;
  options.num_threads = flags.threads;
  options.poll_us = flags.poll_us;
  options.kv_memory_bytes = flags.kv_mb << 20;
  ASSIGN_OR_RETURN(options.kv_dtype, ParseKvDType(flags.kv_dtype));
  if (flags.tp == 1 && !IsMpiLaunched()) {
    std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
    ASSIGN_OR_RETURN(LoadedShard shard, LoadShard(flags.device, *model, comm.get(), options));
    GenerateCapacity capacity;
    capacity.block_size = options.block_size;
    capacity.num_blocks = shard.num_kv_blocks;
    capacity.max_positions = model->config().context_length;
    return Generate(flags, model.get(), [&](const StepPlan& plan) { return shard.executor->Execute(plan); },
                    capacity);
  }
  // One rank of an mpirun job: the group's ranks share the work of every step.
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ExecutorOptions rank_options = options;
    rank_options.tp_rank = comm->rank();
    rank_options.tp_size = comm->size();
    if (rank_options.num_threads == 0) rank_options.num_threads = DefaultThreadsPerRank();
    return LoadShard(flags.device, *model, comm, rank_options);
  };
  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    GenerateCapacity capacity;
    capacity.block_size = options.block_size;
    capacity.num_blocks = info.num_kv_blocks;
    capacity.max_positions = model->config().context_length;
    return Generate(flags, model.get(), [&](const StepPlan& plan) { return group.Execute(plan); }, capacity);
  };
  return RunGroup(make, lead);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  tpserve::RunFlags flags;
  tpserve::CommandLine app("tpserve-run: local generation on one rank or an N-rank tensor-parallel group, for debugging and "
               "scripting. Text streams to stdout, timings to stderr.",
               "tpserve-run");
  tpserve::AddFlags(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  tpserve::StatusOr<tpserve::Device> device = tpserve::ParseDevice(flags.device_name);
  if (!device.ok()) {
    std::cerr << "tpserve-run: " << device.status().ToString() << "\n";
    return 2;
  }
  flags.device = *device;
  if (tpserve::Status twin = tpserve::ExecCudaTwinIfNeeded(flags.device, argv); !twin.ok()) {  // returns on failure
    std::cerr << "tpserve-run: " << twin.ToString() << "\n";
    return 1;
  }
  if (tpserve::Status available = tpserve::CheckDeviceAvailable(flags.device); !available.ok()) {
    std::cerr << "tpserve-run: " << available.ToString() << "\n";
    return 1;
  }
  if (flags.tp > 1 && !tpserve::IsMpiLaunched()) {
    tpserve::Status status = tpserve::ReexecUnderMpirun(flags.tp, argc, argv);  // returns only on failure
    std::cerr << "tpserve-run: " << status.ToString() << "\n";
    return 1;
  }
  if (tpserve::IsMpiLaunched()) {
    return tpserve::RunMpiProcess(&argc, &argv, "tpserve-run", [&] { return tpserve::Run(flags); });
  }
  tpserve::Status status = tpserve::Run(flags);
  if (!status.ok()) {
    std::cerr << "tpserve-run: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
