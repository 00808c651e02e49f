// tpserve-worker: one rank of a worker group, launched by mpirun. Rank 0 (the leader) connects to
// the coordinator's worker endpoint, registers the group (Hello), and serves its step plans; every
// rank executes each plan on its shard. The coordinator's Shutdown ends every rank with exit code 0;
// a lost peer, leader or coordinator ends every rank with an error (MPI_Abort).
//
//   mpirun -np N tpserve-worker --model FILE --coordinator tcp://HOST:PORT [--block-size 16]
//       [--kv-memory-mb MB] [--threads N] [--poll US] [--max-model-len N] [--deadline-s S] [--routing-id ID]
//       [--device cpu|cuda]
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "comm/model_fingerprint.h"
#include "common/logging.h"
#include "kernels/cpu/isa.h"
#include "model/model_file.h"
#include "worker/device_executor.h"
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
  Device device = Device::kCpu;
};

const char kUsage[] =
    "usage: mpirun -np N tpserve-worker --model FILE --coordinator tcp://HOST:PORT [--block-size 16]\n"
    "           [--kv-memory-mb MB] [--threads N] [--poll US] [--max-model-len N] [--deadline-s S] [--routing-id ID]\n"
    "           [--keys DIR [--key-name N]]  (CURVE: DIR/coordinator.pub, DIR/workers/N.key)\n"
    "           [--device cpu|cuda]\n"
    "  --poll US: kernel threads poll for work this many microseconds before sleeping (llama.cpp's --poll)\n";

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return static_cast<int64_t>(v);
  } catch (...) {
  }
  return InvalidArgument(flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got '" + text + "'");
}

StatusOr<WorkerFlags> ParseFlags(int argc, char** argv) {
  WorkerFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return InvalidArgument(arg + " needs a value (or is unknown)");
    const std::string value = argv[++i];
    if (arg == "--model") {
      flags.model = value;
    } else if (arg == "--coordinator") {
      flags.coordinator = value;
    } else if (arg == "--device") {
      ASSIGN_OR_RETURN(flags.device, ParseDevice(value));
    } else if (arg == "--routing-id") {
      flags.routing_id = value;
    } else if (arg == "--keys") {
      flags.keys_dir = value;
    } else if (arg == "--key-name") {
      flags.key_name = value;
    } else if (arg == "--block-size") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(arg, value, 1, 1024));
      flags.block_size = static_cast<int>(v);
    } else if (arg == "--kv-memory-mb") {
      ASSIGN_OR_RETURN(flags.kv_memory_mb, ParseInt(arg, value, 1, int64_t{1} << 24));
    } else if (arg == "--threads") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(arg, value, 0, 1024));
      flags.threads = static_cast<int>(v);
    } else if (arg == "--poll") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(arg, value, 0, 1000000));
      flags.poll_us = static_cast<int>(v);
    } else if (arg == "--max-model-len") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(arg, value, 1, int64_t{1} << 30));
      flags.max_model_len = static_cast<int>(v);
    } else if (arg == "--deadline-s") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(arg, value, 1, 3600));
      flags.deadline_s = static_cast<int>(v);
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  if (flags.model.empty()) return InvalidArgument("--model is required");
  if (flags.coordinator.empty()) return InvalidArgument("--coordinator is required");
  return flags;
}

Status Serve(const WorkerFlags& flags) {
  RETURN_IF_ERROR(InitIsa().status());
  RETURN_IF_ERROR(CheckDeviceAvailable(flags.device));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> model, ModelFile::Open(flags.model));

  GroupRuntimeOptions runtime;
  runtime.collectives.deadline = std::chrono::seconds(flags.deadline_s);
  runtime.control.deadline = std::chrono::seconds(flags.deadline_s);

  auto make = [&](Communicator* comm) -> StatusOr<LoadedShard> {
    ExecutorOptions options;
    options.tp_rank = comm->rank();
    options.tp_size = comm->size();
    options.block_size = flags.block_size;
    options.kv_memory_bytes = flags.kv_memory_mb << 20;
    options.num_threads = flags.threads > 0 ? flags.threads : DefaultThreadsPerRank();
    options.poll_us = flags.poll_us;
    return LoadShard(flags.device, *model, comm, options);  // the executor logs its weight bytes and KV capacity
  };

  auto lead = [&](GroupLeader& group, const GroupInfo& info) -> Status {
    const ModelConfig& config = model->config();
    GroupSessionOptions session;
    session.coordinator_endpoint = flags.coordinator;
    session.routing_id = flags.routing_id;
    session.keys_dir = flags.keys_dir;
    session.key_name = flags.key_name;
    HelloMessage& hello = session.hello;
    ASSIGN_OR_RETURN(hello.model, ComputeModelFingerprint(flags.model));
    hello.tp_size = info.tp_size;
    hello.num_blocks = static_cast<int32_t>(std::min<int64_t>(info.num_kv_blocks, INT32_MAX));
    hello.block_size = flags.block_size;
    int64_t max_len = flags.max_model_len > 0 ? flags.max_model_len : config.context_length;
    if (max_len <= 0) max_len = info.num_kv_blocks * flags.block_size;
    hello.max_model_len = static_cast<int32_t>(std::min<int64_t>(max_len, INT32_MAX));
    hello.vocab_size = config.vocab_size;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    hello.hostname = host;
    hello.pid = static_cast<int32_t>(getpid());
    LOG(INFO) << "worker group of " << info.tp_size << " ranks up: " << info.num_kv_blocks << " KV blocks of "
              << flags.block_size << " tokens; model " << hello.model.ToHex() << "; connecting to "
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
  auto flags = tpserve::ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "tpserve-worker: " << flags.status().ToString() << "\n" << tpserve::kUsage;
    return 2;
  }
  return tpserve::RunMpiProcess(&argc, &argv, "tpserve-worker", [&] { return tpserve::Serve(*flags); });
}
