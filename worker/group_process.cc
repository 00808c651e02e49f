#include "worker/group_process.h"

#include <cstdio>

#include <mpi.h>

namespace tpserve {

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
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;  // not reached
}

}  // namespace tpserve
