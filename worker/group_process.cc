#include "worker/group_process.h"

#include <unistd.h>

#include <cstdio>

#include <mpi.h>

// LeakSanitizer off in every MPI-launched program (tpserve-worker, tpserve-run, the engine bench: all
// link this file through RunMpiProcess). Open MPI's dlopen'ed transport components leave allocations
// behind at MPI_Finalize whose stacks cannot be symbolised after dlclose, so tests/lsan.supp cannot
// name them, and the leak report would turn every clean exit into an abort. Our own code's leaks are
// checked by the non-MPI test binaries (the engine, scheduler, server and client all run there).
extern "C" int __lsan_is_turned_off() { return 1; }

namespace tpserve {
namespace {

constexpr unsigned kAbortGraceSeconds = 5;

}  // namespace

int MpiWorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int MpiWorldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int RunMpiProcess(int* argc, char*** argv, const char* program, const std::function<Status()>& body) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: MPI_Init_thread failed\n", program);
    return 1;
  }
  Status status = body();
  if (status.ok()) {
    MPI_Finalize();
    return 0;
  }
  std::fprintf(stderr, "%s rank %d/%d: %s\n", program, MpiWorldRank(), MpiWorldSize(), status.ToString().c_str());
  std::fflush(stderr);
  // MPI_Abort may wait on a peer that is stopped or unreachable; if this rank is still here after
  // kAbortGraceSeconds, SIGALRM's default action ends it (and mpirun, seeing it die, the job).
  alarm(kAbortGraceSeconds);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;  // not reached
}

}  // namespace tpserve
