// MpiWorkerGroup: a real worker group for end-to-end tests — `mpirun -np N tpserve-worker
// --model M --coordinator ENDPOINT` as a child process. The destructor waits for the group to
// exit (the coordinator's Shutdown ends it) and terminates it if it does not within a deadline.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tpserve::testing {

// tpserve-worker of the build tree this test binary belongs to, or $TPSERVE_WORKER ("" when
// neither exists).
inline std::string FindWorkerBinary() {
  if (const char* env = std::getenv("TPSERVE_WORKER"); env != nullptr && *env) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  std::filesystem::path worker = self.parent_path().parent_path() / "worker" / "tpserve-worker";
  return std::filesystem::exists(worker, ec) ? worker.string() : "";
}

class MpiWorkerGroup {
 public:
  MpiWorkerGroup(const std::string& worker_binary, const std::string& model, const std::string& coordinator_endpoint,
                 int num_ranks, std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = {"mpirun", "-np", std::to_string(num_ranks), "--oversubscribe",
                                     "--allow-run-as-root", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
                                     "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                                     worker_binary, "--model", model, "--coordinator", coordinator_endpoint,
                                     "--threads", "1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    if (posix_spawnp(&pid_, "mpirun", nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }

  ~MpiWorkerGroup() { (void)WaitExit(std::chrono::seconds(30)); }

  bool started() const { return pid_ > 0; }

  // Waits for the job to exit (terminating it after `timeout`); returns its exit code, or -1.
  int WaitExit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGTERM);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // reaping a child, bounded
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace tpserve::testing
