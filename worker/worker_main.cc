// tpserve-worker: one rank of a worker group, launched by mpirun. Rank 0 (the leader) connects to
// the coordinator's worker endpoint, registers the group (Hello), and serves its step plans; every
// rank executes each plan on its shard. The coordinator's Shutdown ends every rank with exit code 0;
// a lost peer, leader or coordinator ends every rank with an error (MPI_Abort).
//
//   mpirun -np N tpserve-worker --model FILE --coordinator tcp://HOST:PORT [--block-size 16]
//       [--kv-memory-mb MB] [--threads N] [--poll US] [--max-model-len N] [--deadline-s S] [--routing-id ID]
//       [--device cpu|cuda] [--sliding-kv free|keep] [--kv-dtype f32|f16|bf16|q8_0] [--draft-model FILE]
//       (tpserve-worker --help: what each flag does)
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "comm/model_fingerprint.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "kernels/cpu/isa.h"
#include "model/model_file.h"
#include "worker/device_executor.h"
#include "worker/drafting_executor.h"
#include "worker/group_launch.h"
#include "worker/group_process.h"
#include "worker/group_runtime.h"
#include "worker/group_session.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

struct WorkerFlags {
  std::string model;
  std::string coordinator;
  std::string routing_id;
  std::string keys_dir;  // CURVE: coordinator.pub and workers/<key_name>.key
  std::string key_name;
  int block_size = 16;
  int64_t kv_memory_mb = 256;
  int threads = 0;  // 0: cores / ranks on this host
  int poll_us = -1;  // < 0: ThreadPool::DefaultPollMicros()
  int max_model_len = 0;  // 0: the model's context length
  int deadline_s = 30;
  std::string device_name = "cpu";
  Device device = Device::kCpu;  // from device_name
  std::string sliding_kv = "free";
  std::string kv_dtype = "f32";
  std::string draft_model;  // empty: none
  bool mmap = false;        // use the weights in place from a mapping of the file
  bool no_mmap = false;     // read the weights into memory
};

void AddFlags(CLI::App& app, WorkerFlags& f) {
  app.add_option("--model", f.model, "GGUF file or Hugging Face safetensors directory")->required();
  app.add_option("--coordinator", f.coordinator, "the coordinator's worker endpoint, tcp://HOST:PORT")->required();
  app.add_option("--block-size", f.block_size, "KV block size in tokens")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--kv-memory-mb", f.kv_memory_mb, "KV cache memory per rank in MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  app.add_option("--threads", f.threads, "kernel threads per rank (0: cores / ranks on this host)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--poll", f.poll_us, "kernel threads poll for work this many microseconds before sleeping "
                 "(llama.cpp's --poll)")->check(CLI::Range(0, 1000000));
  app.add_option("--max-model-len", f.max_model_len, "longest sequence served (0: the model's context length)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--deadline-s", f.deadline_s, "a collective or the leader silent this long fails the group")
      ->check(CLI::Range(1, 3600))->capture_default_str();
  app.add_option("--routing-id", f.routing_id, "the group's ZeroMQ identity at the coordinator (default: random)");
  app.add_option("--keys", f.keys_dir, "CURVE: DIR/coordinator.pub and DIR/workers/<key name>.key");
  app.add_option("--key-name", f.key_name, "CURVE: the group's key name under DIR/workers");
  app.add_option("--device", f.device_name, "cpu or cuda")->capture_default_str();
  app.add_flag("--mmap", f.mmap, kMmapHelp)->excludes(app.add_flag("--no-mmap", f.no_mmap, kNoMmapHelp));
  app.add_option("--sliding-kv", f.sliding_kv, "free: sliding-window layers give back the KV pages that fell out of "
                 "their window (CPU); keep: every layer keeps its pages until the sequence ends")
      ->check(CLI::IsMember({"free", "keep"}))->capture_default_str();
  app.add_option("--kv-dtype", f.kv_dtype, "KV cache element type (CPU; cuda: f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}))->capture_default_str();
  app.add_option("--draft-model", f.draft_model, "a small model of the same vocabulary that proposes tokens for "
                 "speculative decoding (requests with speculative draft); loaded beside the model on every rank");
}

Status Serve(const WorkerFlags& flags) {
  RETURN_IF_ERROR(InitIsa().status());
  RETURN_IF_ERROR(CheckDeviceAvailable(flags.device));
  const WeightLoading loading = WeightLoadingFromFlags(flags.mmap, flags.no_mmap);
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model, loading));
  std::unique_ptr<ModelFile> draft;
  if (!flags.draft_model.empty()) {
    ASSIGN_OR_RETURN(draft, ModelFile::Open(flags.draft_model, loading));
  }

  GroupRuntimeOptions runtime;
  runtime.collectives.deadline = std::chrono::seconds(flags.deadline_s);
  runtime.control.deadline = std::chrono::seconds(flags.deadline_s);

  ExecutorOptions base;
  base.block_size = flags.block_size;
  base.kv_memory_bytes = flags.kv_memory_mb << 20;
  base.num_threads = flags.threads > 0 ? flags.threads : DefaultThreadsPerRank();
  base.poll_us = flags.poll_us;
  // The CUDA executor keeps one page per block for every layer (its paged attention takes one table).
  base.free_sliding_kv = flags.sliding_kv == "free" && flags.device == Device::kCpu;
  ASSIGN_OR_RETURN(base.kv_dtype, ParseKvDType(flags.kv_dtype));
  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ExecutorOptions options = base;
    options.tp_rank = comm->rank();
    options.tp_size = comm->size();
    // The executors log their weight bytes and KV capacity.
    ASSIGN_OR_RETURN(LoadedShard shard, LoadShard(flags.device, *model, comm, options));
    if (draft == nullptr) return shard;
    return LoadDraftingShard(std::move(shard), *model, flags.device, *draft, comm, options);
  };

  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    const ModelConfig& config = model->config();
    GroupSessionOptions session;
    session.coordinator_endpoint = flags.coordinator;
    session.routing_id = flags.routing_id;
    session.keys_dir = flags.keys_dir;
    session.key_name = flags.key_name;
    session.check_ranks = [&group] { return group.CheckRanks(); };
    HelloMessage& hello = session.hello;
    ASSIGN_OR_RETURN(hello.model, ComputeModelFingerprint(flags.model));
    if (draft != nullptr) {
      ASSIGN_OR_RETURN(hello.draft_model, ComputeModelFingerprint(flags.draft_model));
    }
    hello.tp_size = info.tp_size;
    hello.num_blocks = static_cast<int32_t>(std::min<int64_t>(info.num_kv_blocks, INT32_MAX));
    hello.block_size = flags.block_size;
    hello.kv_groups = ExecutorKvLayout(config, base).groups;
    hello.kv_dtype = flags.kv_dtype;
    int64_t max_len = flags.max_model_len > 0 ? flags.max_model_len : config.context_length;
    if (max_len <= 0) max_len = info.num_kv_blocks / hello.kv_groups.num_groups() * flags.block_size;
    hello.max_model_len = static_cast<int32_t>(std::min<int64_t>(max_len, INT32_MAX));
    hello.vocab_size = config.vocab_size;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    hello.hostname = host;
    hello.pid = static_cast<int32_t>(getpid());
    LOG(INFO) << "worker group of " << info.tp_size << " ranks up: " << info.num_kv_blocks << " KV pages of "
              << flags.block_size << " tokens in " << hello.kv_groups.num_groups() << " layer group(s); model " << hello.model.ToHex() << "; connecting to "
              << flags.coordinator;
    zmq::context_t context;
    Status served = ServeCoordinator(context, group, session);
    LOG(INFO) << "worker group: served " << group.num_steps() << " steps: " << served.ToString();
    return served;
  };
  return RunGroup(make, lead, runtime);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  tpserve::WorkerFlags flags;
  tpserve::CommandLine app("tpserve-worker: one rank of a worker group, launched by mpirun -np N; rank 0 registers the group "
               "with the coordinator and serves its step plans.",
               "tpserve-worker");
  tpserve::AddFlags(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  tpserve::StatusOr<tpserve::Device> device = tpserve::ParseDevice(flags.device_name);
  if (!device.ok()) {
    std::cerr << "tpserve-worker: " << device.status().ToString() << "\n";
    return 2;
  }
  flags.device = *device;
  if (tpserve::Status twin = tpserve::ExecCudaTwinIfNeeded(flags.device, argv); !twin.ok()) {  // returns on failure
    std::cerr << "tpserve-worker: " << twin.ToString() << "\n";
    return 1;
  }
  return tpserve::RunMpiProcess(&argc, &argv, "tpserve-worker", [&] { return tpserve::Serve(flags); });
}
