// Launching a worker group from a plain command: `tpserve-run --tp N` re-executes itself under
// mpirun with N ranks (ReexecUnderMpirun) and then, inside the job, each rank finds its place.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tpserve {

// Whether this process is a rank of an mpirun job (Open MPI, PMIx or PMI environment present).
bool IsMpiLaunched();
// Ranks of this job on this host (OMPI_COMM_WORLD_LOCAL_SIZE), 1 outside a job.
int LocalRanksOnHost();
// Kernel threads per rank so that threads x local ranks <= cores (at least 1).
int DefaultThreadsPerRank();

// The mpirun command line that runs `argv` (argv[0] replaced by this executable's path) with
// `num_ranks` ranks on this host: --oversubscribe, --allow-run-as-root, --bind-to none, and
// mpi_yield_when_idle. $TPSERVE_MPIRUN overrides the mpirun program; $TPSERVE_MPIRUN_ARGS
// (whitespace-separated) are added before -np.
std::vector<std::string> MpirunCommand(int num_ranks, int argc, char** argv);

// Replaces this process with MpirunCommand(...). Returns only on failure (UNAVAILABLE: mpirun not
// found or not executable).
Status ReexecUnderMpirun(int num_ranks, int argc, char** argv);

}  // namespace tpserve
