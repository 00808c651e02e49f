// RunMpiProcess: the MPI lifecycle of one rank of a worker group. Initialises MPI (threads
// funnelled: only the main thread calls MPI), runs `body`, and
//  - OK: MPI_Finalize, returns 0;
//  - error: prints "<program> rank r/n: <status>" to stderr and calls MPI_Abort, so that every
//    rank of the job exits at once (a broken group may have collectives in flight, which would
//    make MPI_Finalize hang); should MPI_Abort itself hang (a stopped peer), an alarm ends the
//    process 5 s later. Does not return then.
#pragma once

#include <functional>

#include "common/status.h"

namespace tpserve {

int RunMpiProcess(int* argc, char*** argv, const char* program, const std::function<Status()>& body);

// This rank's place in the job (valid inside RunMpiProcess's body).
int MpiWorldRank();
int MpiWorldSize();

}  // namespace tpserve
