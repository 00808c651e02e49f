// `tpserve serve`: runs a one-host cluster — `tpserve-coordinator`,
// `mpirun -np TP tpserve-worker` pointed at it and, with --http-port, the OpenAI gateway
// `tpserve-http` — as child processes, with laptop defaults
// (oversubscribe, allow-run-as-root, yield when idle, loopback only). SIGTERM/SIGINT drains the
// coordinator (running requests finish), which then shuts the worker group down; exit code 0.
// If the worker group dies on its own (a rank killed, stopped or crashed: the group exits at once),
// it is relaunched with the same command line after an exponential backoff, up to --max-restarts
// times in a row, while the coordinator stays up (health not ok while no group serves) and replays
// the lost group's requests on the new one. Past --max-restarts, the coordinator is drained and the
// exit code is 1. A coordinator that dies on its own (not drained) is relaunched the same way on the
// same ports; the worker group keeps its weights and registers with it (the requests it held fail:
// their clients time out and may resubmit with the seed).
//
// The binaries are found beside this executable or in the build tree's sibling folders
// (../coordinator, ../worker, ./http); $TPSERVE_COORDINATOR, $TPSERVE_WORKER, $TPSERVE_HTTP and
// $TPSERVE_MPIRUN override. The gateway stops (SIGTERM) once the coordinator has exited; if it
// dies on its own, the coordinator is drained and the exit code is 1.
#pragma once

namespace tpserve {

// argv[1] == "serve". Returns the process exit code.
int RunServeCommand(int argc, char** argv);

}  // namespace tpserve
