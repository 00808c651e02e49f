#include "worker/group_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

namespace tpserve {

bool IsMpiLaunched() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

int LocalRanksOnHost() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == nullptr) return 1;
  const int n = std::atoi(local);
  return n > 0 ? n : 1;
}

int DefaultThreadsPerRank() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, (cores > 0 ? cores : 1) / LocalRanksOnHost());
}

std::vector<std::string> MpirunCommand(int num_ranks, int argc, char** argv) {
  const char* mpirun = std::getenv("TPSERVE_MPIRUN");
  std::vector<std::string> command = {mpirun != nullptr ? mpirun : "mpirun", "--oversubscribe",
                                      "--allow-run-as-root", "--bind-to", "none",
                                      "--mca", "mpi_yield_when_idle", "1"};
  if (const char* extra = std::getenv("TPSERVE_MPIRUN_ARGS")) {
    std::istringstream words(extra);
    for (std::string word; words >> word;) command.push_back(word);
  }
  command.push_back("-np");
  command.push_back(std::to_string(num_ranks));
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  command.push_back(ec ? std::string(argv[0]) : self.string());
  for (int i = 1; i < argc; ++i) command.push_back(argv[i]);
  return command;
}

Status ReexecUnderMpirun(int num_ranks, int argc, char** argv) {
  std::vector<std::string> command = MpirunCommand(num_ranks, argc, argv);
  std::vector<char*> args;
  for (std::string& word : command) args.push_back(word.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  return Unavailable("could not start " + command[0] + ": " + std::strerror(errno));
}

}  // namespace tpserve
