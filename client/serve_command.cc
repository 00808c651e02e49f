#include "client/serve_command.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/restart_policy.h"
#include "common/command_line.h"

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
  int max_restarts = 5;  // relaunches of the worker group (or the coordinator) in a row
  int restart_backoff_ms = 500;  // before the first relaunch in a row; doubles with each further one
};

using Clock = RestartPolicy::Clock;

std::string ExitText(int status) {
  return WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                           : "signal " + std::to_string(WTERMSIG(status));
}

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

// Flags of the children, passed through as given: name -> value (empty when not given).
struct PassThrough {
  const char* flag;
  const char* help;
  std::string value;
};

// Declares serve's flags; after parsing, Finish() moves the pass-through ones into worker_args and
// coordinator_args.
class ServeFlagParser {
 public:
  ServeFlagParser(CLI::App& app, ServeFlags& f) : flags_(f) {
    app.add_option("--model", f.model, "GGUF file or Hugging Face directory")->required();
    app.add_option("--tp", f.tp, "tensor-parallel ranks of the worker group")->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--host", f.host, "the coordinator's address")->capture_default_str();
    app.add_option("--port", f.port, "client endpoint port")->check(CLI::Range(1, 65535))->capture_default_str();
    app.add_option("--worker-port", f.worker_port, "worker endpoint port")->check(CLI::Range(1, 65535))
        ->capture_default_str();
    app.add_option("--max-restarts", f.max_restarts,
                   "relaunch a lost worker group (or a crashed coordinator) at most this many times in a row "
                   "(one that ran 60 s resets the count)")
        ->check(CLI::Range(0, 1 << 20))->capture_default_str();
    app.add_option("--restart-backoff-ms", f.restart_backoff_ms,
                   "wait before the first relaunch (doubling for each further one in a row, at most 30 s)")
        ->check(CLI::Range(0, 60000))->capture_default_str();
    for (PassThrough& p : worker_) app.add_option(p.flag, p.value, p.help)->group("Worker group (tpserve-worker)");
    for (PassThrough& p : coordinator_) {
      app.add_option(p.flag, p.value, p.help)->group("Coordinator (tpserve-coordinator)");
    }
    CLI::Option* no_mmap = app.add_flag("--no-mmap", no_mmap_, "always read the weights into memory, in 2 MiB pages "
                                        "(by default they are mapped in 2 MiB pages, the file read again from disk "
                                        "where the page cache held it in 4 KiB ones)")
                               ->group("Worker group (tpserve-worker)");
    app.add_flag("--mmap", mmap_, "always use the weights in place from a mapping of the model file, even where "
                 "the page cache holds it in 4 KiB pages")
        ->group("Worker group (tpserve-worker)")
        ->excludes(no_mmap);
    app.add_flag("--no-prefix-cache", no_prefix_cache_, "never reuse cached prompt blocks")
        ->group("Coordinator (tpserve-coordinator)");
    app.add_flag("--insecure", insecure_, "bind a non-loopback --host without keys (and the gateway without --api-key)")
        ->group("Coordinator (tpserve-coordinator)");
    app.add_option("--keys", keys_dir_, "CURVE key directory, for the coordinator, the workers and the gateway "
                   "(`tpserve keys init`)");
    app.add_option("--api-key", api_key_, "a key clients must send (coordinator and gateway)")
        ->group("Coordinator (tpserve-coordinator)");
    app.add_option("--http-port", f.http_port, "also start tpserve-http, the OpenAI API, on this port")
        ->check(CLI::Range(0, 65535))->group("HTTP gateway (tpserve-http)");
    app.add_option("--served-model-name", served_model_name_, "model name in OpenAI replies")
        ->group("HTTP gateway (tpserve-http)");
  }

  void Finish() {
    for (const PassThrough& p : worker_) {
      if (!p.value.empty()) flags_.worker_args.insert(flags_.worker_args.end(), {p.flag, p.value});
    }
    for (const PassThrough& p : coordinator_) {
      if (!p.value.empty()) flags_.coordinator_args.insert(flags_.coordinator_args.end(), {p.flag, p.value});
    }
    if (no_prefix_cache_) flags_.coordinator_args.push_back("--no-prefix-caching");
    if (mmap_) flags_.worker_args.push_back("--mmap");
    if (no_mmap_) flags_.worker_args.push_back("--no-mmap");
    if (insecure_) {
      for (auto* args : {&flags_.coordinator_args, &flags_.http_args}) args->push_back("--insecure");
    }
    if (!keys_dir_.empty()) {  // every side: coordinator pair, workers/default, the gateway's clients/default
      for (auto* args : {&flags_.worker_args, &flags_.coordinator_args, &flags_.http_args}) {
        args->insert(args->end(), {"--keys", keys_dir_});
      }
    }
    // The gateway accepts the coordinator's API keys from HTTP clients and sends the first one on.
    if (!api_key_.empty()) {
      for (auto* args : {&flags_.coordinator_args, &flags_.http_args}) args->insert(args->end(), {"--api-key", api_key_});
    }
    if (!served_model_name_.empty()) flags_.http_args.insert(flags_.http_args.end(), {"--served-model-name", served_model_name_});
  }

 private:
  ServeFlags& flags_;
  PassThrough worker_[8] = {{"--threads", "kernel threads per rank", ""},
                            {"--kv-memory-mb", "KV cache memory per rank in MiB", ""},
                            {"--block-size", "KV block size in tokens", ""},
                            {"--poll", "kernel threads poll this many microseconds before sleeping", ""},
                            {"--device", "cpu or cuda", ""},
                            {"--sliding-kv", "free (default): sliding-window layers give back KV pages past the "
                             "window; keep", ""},
                            {"--kv-dtype", "KV cache element type: f32, f16, bf16 or q8_0", ""},
                            {"--draft-model", "a small model of the same vocabulary for speculative draft "
                             "(loaded on every rank)", ""}};
  PassThrough coordinator_[9] = {{"--max-num-seqs", "sequences running at once", ""},
                                 {"--speculative", "speculative decoding by default: off, ngram:K or draft:K", ""},
                                 {"--max-replays", "re-run a request this many times when its worker group is lost", ""},
                                 {"--max-batched-tokens", "token budget of one step", ""},
                                 {"--max-queue", "waiting sequences before `overloaded` (HTTP 429)", ""},
                                 {"--max-queued-tokens", "waiting prompt tokens before `overloaded` (HTTP 429)", ""},
                                 {"--max-model-len", "longest sequence", ""},
                                 {"--metrics-port", "serve GET /metrics over HTTP on this port", ""},
                                 {"--metrics-host", "the metrics endpoint's address", ""}};
  bool no_prefix_cache_ = false;
  bool mmap_ = false;
  bool no_mmap_ = false;
  bool insecure_ = false;
  std::string keys_dir_;
  std::string api_key_;
  std::string served_model_name_;
};

}  // namespace

int RunServeCommand(int argc, char** argv) {
  CommandLine app("tpserve serve: a one-host cluster: tpserve-coordinator and `mpirun -np TP tpserve-worker` "
                  "pointed at it. SIGTERM/SIGINT drains (exit code 0).",
                  "tpserve serve");
  ServeFlags flags;
  ServeFlagParser parser(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc - 1, argv + 1)) return *exit_code;  // argv[1]: serve
  parser.Finish();
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
  const auto first_backoff = std::chrono::milliseconds(flags.restart_backoff_ms);
  RestartPolicy workers_restarts(first_backoff, flags.max_restarts, Clock::now());
  RestartPolicy coordinator_restarts(first_backoff, flags.max_restarts, Clock::now());

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
  auto coordinator_exit_time = Clock::time_point::max();
  auto drain = [&](const std::string& why) {
    std::cerr << "tpserve serve: " << why << "; draining the coordinator\n";
    exit_code = 1;
    if (!drain_sent && coordinator_pid > 0) kill(coordinator_pid, SIGTERM);
    drain_sent = true;
  };
  // Supervise: poll the children (a supervisor's tick, not a synchronisation).
  while (coordinator_pid > 0 || workers_pid > 0 || http_pid > 0 || coordinator_restarts.is_pending()) {
    if (g_stop_requested && !drain_sent && coordinator_pid > 0) {
      std::cerr << "tpserve serve: draining\n";
      kill(coordinator_pid, SIGTERM);
      drain_sent = true;
    }
    const bool is_serving = !drain_sent && !g_stop_requested;
    int status = 0;
    if (coordinator_pid > 0 && waitpid(coordinator_pid, &status, WNOHANG) == coordinator_pid) {
      coordinator_pid = -1;
      const bool is_clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      // A coordinator that died on its own is relaunched on the same ports; the worker group keeps
      // its weights and registers with it (the requests it held are lost; their clients are told).
      if (!is_clean && is_serving && coordinator_restarts.OnExit(Clock::now())) {
        std::cerr << "tpserve serve: the coordinator exited (" << ExitText(status) << "); relaunching it in "
                  << coordinator_restarts.backoff().count() << " ms\n";
      } else {
        coordinator_exit_time = Clock::now();
        if (!is_clean) exit_code = 1;
      }
    }
    if (coordinator_restarts.IsDue(Clock::now())) {
      coordinator_restarts.OnStart(Clock::now());
      if (!drain_sent && !g_stop_requested) {
        std::cerr << "tpserve serve: " << Join(coordinator) << "\n";
        coordinator_pid = Spawn(coordinator);
      }
      if (coordinator_pid < 0) {  // stopping meanwhile, or it cannot start
        if (!drain_sent && !g_stop_requested) std::cerr << "tpserve serve: cannot start " << coordinator[0] << "\n";
        exit_code = 1;
        coordinator_exit_time = Clock::now();
      }
    }
    const bool has_coordinator = coordinator_pid > 0 || coordinator_restarts.is_pending();
    if (workers_pid > 0 && waitpid(workers_pid, &status, WNOHANG) == workers_pid) {
      workers_pid = -1;
      if (has_coordinator && is_serving && workers_restarts.OnExit(Clock::now())) {
        // The coordinator keeps the group's requests and replays them on the relaunched group.
        std::cerr << "tpserve serve: the worker group exited (" << ExitText(status) << "); relaunching it in "
                  << workers_restarts.backoff().count() << " ms (restart " << workers_restarts.num_in_a_row()
                  << " of " << flags.max_restarts << " in a row)\n";
      } else if (has_coordinator && is_serving) {
        drain("the worker group exited too often (--max-restarts " + std::to_string(flags.max_restarts) + ")");
      }
    }
    // (While the coordinator itself is being relaunched, the group's relaunch waits for it.)
    if (workers_restarts.IsDue(Clock::now()) && !coordinator_restarts.is_pending()) {
      if (coordinator_pid > 0 && !drain_sent && !g_stop_requested) {
        std::cerr << "tpserve serve: " << Join(workers) << "\n";
        workers_pid = Spawn(workers);
        if (workers_pid < 0) drain("cannot start " + workers[0]);
      }
      workers_restarts.OnStart(Clock::now());
    }
    if (http_pid > 0 && waitpid(http_pid, &status, WNOHANG) == http_pid) {
      http_pid = -1;
      if (coordinator_pid > 0 && !http_stop_sent) drain("the HTTP gateway exited");
    }
    const bool is_coordinator_gone = coordinator_pid < 0 && !coordinator_restarts.is_pending();
    // The gateway serves until the coordinator is gone (drained requests finish streaming).
    if (is_coordinator_gone && http_pid > 0 && !http_stop_sent) {
      kill(http_pid, SIGTERM);
      http_stop_sent = true;
    }
    // The coordinator sends Shutdown to the group on exit; give it time, then insist.
    if (is_coordinator_gone && workers_pid > 0 && Clock::now() - coordinator_exit_time > std::chrono::seconds(15)) {
      std::cerr << "tpserve serve: worker group still running after shutdown; terminating it\n";
      kill(workers_pid, SIGTERM);
      coordinator_exit_time = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return exit_code;
}

}  // namespace tpserve
