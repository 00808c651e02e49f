// tpserve-run: local generation on one rank, for debugging and scripting.
//   tpserve-run --model FILE (--prompt TEXT | --prompt-ids 1,2,3) [--max-tokens N] [--temperature T]
//     [--top-k K] [--top-p P] [--seed S] [--ignore-eos] [--print-ids] [--threads N] [--poll US] [--chat]
// --device cuda runs the rank(s) on GPUs (worker/device_executor.h); the default is cpu.
// --tp N (N > 1) re-executes this command under `mpirun -np N` and generates on an N-rank tensor-parallel
// group (rank 0 drives and prints; the other ranks serve its steps; see worker/group_runtime.h).
// With --print-ids the generated ids (not the prompt) go space-separated on one line of stdout;
// otherwise the generated text streams to stdout. Timings go to stderr.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
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
  std::string prompt;
  bool has_prompt = false;
  std::vector<int32_t> prompt_ids;
  bool has_prompt_ids = false;
  int max_tokens = 32;
  SamplingParams sampling;
  bool ignore_eos = false;
  bool print_ids = false;
  bool chat = false;
  int threads = 0;
  int poll_us = -1;  // < 0: ThreadPool::DefaultPollMicros()
  int64_t kv_mb = 256;
  int tp = 1;
  Device device = Device::kCpu;
};

const char kUsage[] =
    "usage: tpserve-run --model FILE (--prompt TEXT | --prompt-ids 1,2,3) [--max-tokens N] [--temperature T]\n"
    "                   [--top-k K] [--top-p P] [--seed S] [--ignore-eos] [--print-ids] [--threads N] [--chat]\n"
    "                   [--kv-mb MB] [--tp N] [--poll US] [--device cpu|cuda]\n"
    "  --poll US: kernel threads poll for work this many microseconds before sleeping (llama.cpp's --poll)\n";

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(v);
  } catch (...) {
  }
  return InvalidArgument(flag + ": not an integer: '" + text + "'");
}

StatusOr<double> ParseFloat(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (...) {
  }
  return InvalidArgument(flag + ": not a number: '" + text + "'");
}

StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    ASSIGN_OR_RETURN(int64_t id, ParseInt("--prompt-ids", text.substr(begin, end - begin)));
    if (id < 0 || id > INT32_MAX) return InvalidArgument("--prompt-ids: id out of range: " + std::to_string(id));
    ids.push_back(static_cast<int32_t>(id));
    begin = end + 1;
  }
  return ids;
}

StatusOr<RunFlags> ParseFlags(int argc, char** argv) {
  RunFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--model") {
      ASSIGN_OR_RETURN(flags.model, value());
    } else if (arg == "--prompt") {
      ASSIGN_OR_RETURN(flags.prompt, value());
      flags.has_prompt = true;
    } else if (arg == "--prompt-ids") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(flags.prompt_ids, ParseIds(text));
      flags.has_prompt_ids = true;
    } else if (arg == "--max-tokens") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(int64_t n, ParseInt(arg, text));
      if (n < 0 || n > 1 << 20) return InvalidArgument("--max-tokens out of range");
      flags.max_tokens = static_cast<int>(n);
    } else if (arg == "--temperature") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(double t, ParseFloat(arg, text));
      if (t < 0) return InvalidArgument("--temperature must be >= 0");
      flags.sampling.temperature = static_cast<float>(t);
    } else if (arg == "--top-k") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(int64_t k, ParseInt(arg, text));
      if (k < 0) return InvalidArgument("--top-k must be >= 0");
      flags.sampling.top_k = static_cast<int32_t>(k);
    } else if (arg == "--top-p") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(double p, ParseFloat(arg, text));
      if (p <= 0 || p > 1) return InvalidArgument("--top-p must be in (0, 1]");
      flags.sampling.top_p = static_cast<float>(p);
    } else if (arg == "--seed") {  // all 64 bits: the seeds a server draws (and reports) use them
      ASSIGN_OR_RETURN(std::string text, value());
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        return InvalidArgument("--seed: not an unsigned integer: '" + text + "'");
      }
      try {
        flags.sampling.seed = std::stoull(text);
      } catch (const std::out_of_range&) {
        return InvalidArgument("--seed: beyond 64 bits: '" + text + "'");
      }
    } else if (arg == "--threads") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(int64_t n, ParseInt(arg, text));
      if (n < 0 || n > 1024) return InvalidArgument("--threads out of range");
      flags.threads = static_cast<int>(n);
    } else if (arg == "--poll") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(int64_t us, ParseInt(arg, text));
      if (us < 0 || us > 1000000) return InvalidArgument("--poll must be in [0, 1000000] microseconds");
      flags.poll_us = static_cast<int>(us);
    } else if (arg == "--kv-mb") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(flags.kv_mb, ParseInt(arg, text));
      if (flags.kv_mb < 1) return InvalidArgument("--kv-mb must be positive");
    } else if (arg == "--tp") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(int64_t n, ParseInt(arg, text));
      if (n < 1 || n > 1024) return InvalidArgument("--tp out of range");
      flags.tp = static_cast<int>(n);
    } else if (arg == "--device") {
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(flags.device, ParseDevice(text));
    } else if (arg == "--ignore-eos") {
      flags.ignore_eos = true;
    } else if (arg == "--print-ids") {
      flags.print_ids = true;
    } else if (arg == "--chat") {
      flags.chat = true;
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  if (flags.model.empty()) return InvalidArgument("--model is required");
  if (flags.has_prompt == flags.has_prompt_ids) return InvalidArgument("give exactly one of --prompt, --prompt-ids");
  if (flags.chat && !flags.has_prompt) return InvalidArgument("--chat needs --prompt");
  return flags;
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
  if (flags.has_prompt || !flags.print_ids) {
    ASSIGN_OR_RETURN(tokenizer, LoadTokenizer(*model));
  }

  std::vector<int32_t> prompt = flags.prompt_ids;
  if (flags.has_prompt) {
    std::string text = flags.prompt;
    if (flags.chat) {
      text = RenderChat(DetectChatFormat(config.chat_template), {ChatMessage{"user", flags.prompt}},
                        /*add_generation_prompt=*/true);
    }
    prompt = tokenizer->Encode(text, config.add_bos, /*parse_special=*/flags.chat);
  }

  GenerateOptions generate;
  generate.max_tokens = flags.max_tokens;
  generate.sampling = flags.sampling;
  generate.ignore_eos = flags.ignore_eos;
  if (config.eos_id >= 0) generate.stop_ids.push_back(config.eos_id);
  if (config.eot_id >= 0) generate.stop_ids.push_back(config.eot_id);
  std::unique_ptr<StreamDecoder> decoder;
  if (!flags.print_ids) {
    decoder = std::make_unique<StreamDecoder>(*tokenizer);
    generate.on_token = [&](int32_t id) {
      if (!flags.ignore_eos && (id == config.eos_id || id == config.eot_id)) return;
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
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model));
  ExecutorOptions options;
  options.num_threads = flags.threads;
  options.poll_us = flags.poll_us;
  options.kv_memory_bytes = flags.kv_mb << 20;
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
  auto flags = tpserve::ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "tpserve-run: " << flags.status().ToString() << "\n" << tpserve::kUsage;
    return 2;
  }
  if (tpserve::Status device = tpserve::CheckDeviceAvailable(flags->device); !device.ok()) {
    std::cerr << "tpserve-run: " << device.ToString() << "\n";
    return 1;
  }
  if (flags->tp > 1 && !tpserve::IsMpiLaunched()) {
    tpserve::Status status = tpserve::ReexecUnderMpirun(flags->tp, argc, argv);  // returns only on failure
    std::cerr << "tpserve-run: " << status.ToString() << "\n";
    return 1;
  }
  if (tpserve::IsMpiLaunched()) {
    return tpserve::RunMpiProcess(&argc, &argv, "tpserve-run", [&] { return tpserve::Run(*flags); });
  }
  tpserve::Status status = tpserve::Run(*flags);
  if (!status.ok()) {
    std::cerr << "tpserve-run: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
