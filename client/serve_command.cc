#include "client/serve_command.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tpserve {
namespace {

volatile sig_atomic_t g_stop_requested = 0;

void OnSignal(int) { g_stop_requested = 1; }

struct ServeFlags {
  std::string model;
  int tp = 1;
  std::string host = "127.0.0.1";
  int port = 5555;
  int worker_port = 5556;
  int http_port = 0;                     // 0: no HTTP gateway
  std::vector<std::string> http_args;    // passed through to tpserve-http
  std::vector<std::string> worker_args;  // passed through to tpserve-worker
  std::vector<std::string> coordinator_args;
};

const char kServeUsage[] =
    "usage: tpserve serve --model M [--tp N] [--host H] [--port P] [--worker-port P]\n"
    "                     [--threads N] [--kv-memory-mb MB] [--block-size N]    (to tpserve-worker)\n"
    "                     [--device cpu|cuda]                                    (to tpserve-worker)\n"
    "                     [--poll US]                                            (to tpserve-worker)\n"
    "                     [--max-num-seqs N] [--max-batched-tokens N] [--api-key K] (to the coordinator)\n"
    "                     [--no-prefix-cache] [--insecure] [--max-queue N]       (to the coordinator)\n"
    "                     [--keys DIR]                   (CURVE: coordinator and workers, `tpserve keys init`)\n"
    "                     [--metrics-port P] [--metrics-host H]                  (to the coordinator)\n"
    "                     [--http-port P [--served-model-name NAME]]             (tpserve-http, the OpenAI API)\n";

std::string FindBinary(const char* env, const std::string& name, const std::string& sibling_dir) {
  if (const char* v = std::getenv(env); v != nullptr && *v) return v;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& p : {self.parent_path() / name, self.parent_path().parent_path() / sibling_dir / name}) {
      if (std::filesystem::exists(p, ec)) return p.string();
    }
  }
  return name;  // from $PATH
}

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

std::string Join(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

bool ParseServeFlags(int argc, char** argv, ServeFlags* f) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-prefix-cache") {  // flags without a value
      f->coordinator_args.push_back("--no-prefix-caching");
      continue;
    }
    if (arg == "--insecure") {
      f->coordinator_args.push_back("--insecure");
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "tpserve serve: " << arg << " needs a value\n";
      return false;
    }
    std::string value = argv[++i];
    if (arg == "--model") {
      f->model = value;
    } else if (arg == "--tp") {
      f->tp = std::atoi(value.c_str());
    } else if (arg == "--host") {
      f->host = value;
    } else if (arg == "--port") {
      f->port = std::atoi(value.c_str());
    } else if (arg == "--worker-port") {
      f->worker_port = std::atoi(value.c_str());
    } else if (arg == "--http-port") {
      f->http_port = std::atoi(value.c_str());
    } else if (arg == "--served-model-name") {
      f->http_args.insert(f->http_args.end(), {arg, value});
    } else if (arg == "--threads" || arg == "--kv-memory-mb" || arg == "--block-size" || arg == "--poll" ||
               arg == "--device") {
      f->worker_args.insert(f->worker_args.end(), {arg, value});
    } else if (arg == "--keys") {  // every side: coordinator pair, workers/default, the gateway's clients/default
      f->worker_args.insert(f->worker_args.end(), {arg, value});
      f->coordinator_args.insert(f->coordinator_args.end(), {arg, value});
      f->http_args.insert(f->http_args.end(), {arg, value});
    } else if (arg == "--max-num-seqs" || arg == "--max-batched-tokens" || arg == "--api-key" ||
               arg == "--max-model-len" || arg == "--metrics-port" || arg == "--metrics-host" ||
               arg == "--max-queue") {
      f->coordinator_args.insert(f->coordinator_args.end(), {arg, value});
      // The gateway accepts the same keys from HTTP clients and sends the first to the coordinator.
      if (arg == "--api-key") f->http_args.insert(f->http_args.end(), {arg, value});
    } else {
      std::cerr << "tpserve serve: unknown flag " << arg << "\n";
      return false;
    }
  }
  if (f->model.empty() || f->tp < 1 || f->port <= 0 || f->worker_port <= 0 || f->http_port < 0) {
    std::cerr << "tpserve serve: --model is required; --tp, ports must be positive\n";
    return false;
  }
  return true;
}

}  // namespace

int RunServeCommand(int argc, char** argv) {
  ServeFlags flags;
  if (!ParseServeFlags(argc, argv, &flags)) {
    std::cerr << kServeUsage;
    return 2;
  }
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  std::vector<std::string> coordinator = {FindBinary("TPSERVE_COORDINATOR", "tpserve-coordinator", "coordinator"),
                                          "--model", flags.model, "--host", flags.host,
                                          "--port", std::to_string(flags.port),
                                          "--worker-port", std::to_string(flags.worker_port)};
  coordinator.insert(coordinator.end(), flags.coordinator_args.begin(), flags.coordinator_args.end());
  const char* mpirun_env = std::getenv("TPSERVE_MPIRUN");
  std::vector<std::string> workers = {mpirun_env && *mpirun_env ? mpirun_env : "mpirun",
                                      "-np", std::to_string(flags.tp), "--oversubscribe", "--allow-run-as-root",
                                      "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
                                      // One host: shared memory between the ranks. Measured on SmolLM2 at TP 2:
                                      // TPOT 13 ms over shared memory vs 50 ms over TCP loopback (the ~60
                                      // all-reduces of a step each pay the TCP round trip).
                                      "--mca", "btl", "self,vader",
                                      FindBinary("TPSERVE_WORKER", "tpserve-worker", "worker"),
                                      "--model", flags.model,
                                      "--coordinator", "tcp://127.0.0.1:" + std::to_string(flags.worker_port)};
  workers.insert(workers.end(), flags.worker_args.begin(), flags.worker_args.end());

  std::cerr << "tpserve serve: " << Join(coordinator) << "\n";
  pid_t coordinator_pid = Spawn(coordinator);
  if (coordinator_pid < 0) {
    std::cerr << "tpserve serve: cannot start " << coordinator[0] << "\n";
    return 1;
  }
  std::cerr << "tpserve serve: " << Join(workers) << "\n";
  pid_t workers_pid = Spawn(workers);
  if (workers_pid < 0) {
    std::cerr << "tpserve serve: cannot start " << workers[0] << "\n";
    kill(coordinator_pid, SIGTERM);
    waitpid(coordinator_pid, nullptr, 0);
    return 1;
  }

  // The gateway is a child process like the others (not a thread of this supervisor): the same
  // binary as a standalone gateway, and a crash in it cannot take the supervisor down.
  pid_t http_pid = -1;
  if (flags.http_port > 0) {
    const bool is_wildcard = flags.host == "0.0.0.0" || flags.host == "*";
    std::vector<std::string> http = {FindBinary("TPSERVE_HTTP", "tpserve-http", "client/http"),
                                     "--coordinator", "tcp://" + (is_wildcard ? std::string("127.0.0.1") : flags.host) +
                                                          ":" + std::to_string(flags.port),
                                     "--host", flags.host, "--port", std::to_string(flags.http_port)};
    http.insert(http.end(), flags.http_args.begin(), flags.http_args.end());
    std::cerr << "tpserve serve: " << Join(http) << "\n";
    http_pid = Spawn(http);
    if (http_pid < 0) std::cerr << "tpserve serve: cannot start " << http[0] << "\n";
  }
  bool http_stop_sent = false;

  int exit_code = http_pid < 0 && flags.http_port > 0 ? 1 : 0;
  bool drain_sent = http_pid < 0 && flags.http_port > 0;
  if (drain_sent) kill(coordinator_pid, SIGTERM);
  int coordinator_status = 0;
  auto coordinator_exit_time = std::chrono::steady_clock::time_point::max();
  // Supervise: poll both children (a supervisor's tick, not a synchronisation).
  while (coordinator_pid > 0 || workers_pid > 0 || http_pid > 0) {
    if (g_stop_requested && !drain_sent && coordinator_pid > 0) {
      std::cerr << "tpserve serve: draining\n";
      kill(coordinator_pid, SIGTERM);
      drain_sent = true;
    }
    int status = 0;
    if (coordinator_pid > 0 && waitpid(coordinator_pid, &status, WNOHANG) == coordinator_pid) {
      coordinator_pid = -1;
      coordinator_status = status;
      coordinator_exit_time = std::chrono::steady_clock::now();
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) exit_code = 1;
    }
    if (workers_pid > 0 && waitpid(workers_pid, &status, WNOHANG) == workers_pid) {
      workers_pid = -1;
      if (coordinator_pid > 0) {
        std::cerr << "tpserve serve: the worker group exited; draining the coordinator\n";
        exit_code = 1;
        if (!drain_sent) kill(coordinator_pid, SIGTERM);
        drain_sent = true;
      }
    }
    if (http_pid > 0 && waitpid(http_pid, &status, WNOHANG) == http_pid) {
      http_pid = -1;
      if (coordinator_pid > 0 && !http_stop_sent) {
        std::cerr << "tpserve serve: the HTTP gateway exited; draining the coordinator\n";
        exit_code = 1;
        if (!drain_sent) kill(coordinator_pid, SIGTERM);
        drain_sent = true;
      }
    }
    // The gateway serves until the coordinator is gone (drained requests finish streaming).
    if (coordinator_pid < 0 && http_pid > 0 && !http_stop_sent) {
      kill(http_pid, SIGTERM);
      http_stop_sent = true;
    }
    // The coordinator sends Shutdown to the group on exit; give it time, then insist.
    if (coordinator_pid < 0 && workers_pid > 0 &&
        std::chrono::steady_clock::now() - coordinator_exit_time > std::chrono::seconds(15)) {
      std::cerr << "tpserve serve: worker group still running after shutdown; terminating it\n";
      kill(workers_pid, SIGTERM);
      coordinator_exit_time = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (void)coordinator_status;
  return exit_code;
}

}  // namespace tpserve
