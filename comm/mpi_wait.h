// Waiting for a non-blocking MPI request (or any condition: WaitUntil) without burning a core: MPI_Test
// polled with sched_yield
// for `spin`, then with sleeps that double from min_sleep to max_sleep, until the request completes
// or a deadline passes. Open MPI otherwise busy-polls inside blocking calls without yielding, and on
// machines where ranks share cores with the coordinator and each other, a rank that holds its core
// starves the busy ones; a yielding poll hands the core over and still sees a completion at once.
// Measured (bench/README.md): polling 250 us instead of 20 us before the first sleep took SmolLM2
// decode at B=1 from 80 to 131 tok/s at TP 2 and from 32-38 to 77-105 at TP 4 on 2 cores.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include <mpi.h>

#include "comm/peer_liveness.h"
#include "common/status.h"

namespace tpserve {

// MPI_CHECK(call): for an MPI call on a communicator with MPI_ERRORS_RETURN. On failure returns
// from the enclosing function (Status or StatusOr) with UNAVAILABLE naming the call, file:line
// and MPI_Error_string (a failed MPI call almost always means a lost peer).
#define MPI_CHECK(call)                                                     \
  do {                                                                      \
    int _mpi_rc = (call);                                                   \
    if (_mpi_rc != MPI_SUCCESS) {                                           \
      return ::tpserve::MpiError(#call, _mpi_rc, __FILE__, __LINE__);       \
    }                                                                       \
  } while (0)

Status MpiError(const char* what, int rc, const char* file, int line);

struct WaitPolicy {
  // MPI_Test + sched_yield polling for this long before the first sleep: longer than the compute
  // imbalance between ranks in a decode step, so in-step collectives never pay a sleep's wake-up.
  std::chrono::microseconds spin{250};
  std::chrono::microseconds min_sleep{4};
  std::chrono::microseconds max_sleep{1000};
  bool always_spin = false;  // never sleep (for measuring what the backoff costs and saves)
  // Borrowed, may be null: checked on every poll, so a wait ends (with its UNAVAILABLE) as soon as
  // a peer is known gone rather than at the deadline.
  const PeerLiveness* liveness = nullptr;
};

using SteadyClock = std::chrono::steady_clock;

// Polls `done` under `policy` until it returns true. DEADLINE_EXCEEDED naming `what` if `deadline`
// passes first; UNAVAILABLE if policy.liveness reports a peer gone; done's own error at once.
Status WaitUntil(const std::function<StatusOr<bool>()>& done, const WaitPolicy& policy,
                 std::optional<SteadyClock::time_point> deadline, const char* what);

// Completes `*request`. DEADLINE_EXCEEDED naming `what` if `deadline` passes first (the request is
// then left pending and the communicator that issued it must be considered broken);
// UNAVAILABLE if MPI reports an error or policy.liveness reports a peer gone (the request is then
// left pending too). No deadline: wait until done or a peer is gone (an idle follower).
Status WaitForRequest(MPI_Request* request, const WaitPolicy& policy,
                      std::optional<SteadyClock::time_point> deadline, const char* what);

}  // namespace tpserve
