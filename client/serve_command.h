// `tpserve serve`: runs a one-host cluster — `tpserve-coordinator` and
// `mpirun -np TP tpserve-worker` pointed at it — as child processes, with laptop defaults
// (oversubscribe, allow-run-as-root, yield when idle, loopback only). SIGTERM/SIGINT drains the
// coordinator (running requests finish), which then shuts the worker group down; exit code 0.
// If the worker group dies on its own, the coordinator is drained too and the exit code is 1.
//
// The binaries are found beside this executable or in the build tree's sibling folders
// (../coordinator, ../worker); $TPSERVE_COORDINATOR, $TPSERVE_WORKER and $TPSERVE_MPIRUN override.
#pragma once

namespace tpserve {

// argv[1] == "serve". Returns the process exit code.
int RunServeCommand(int argc, char** argv);

}  // namespace tpserve
