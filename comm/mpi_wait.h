// Waiting for a non-blocking MPI request without burning a core: MPI_Test in a short spin, then
// with sleeps that double from min_sleep to max_sleep, until the request completes or a deadline
// passes. Open MPI otherwise busy-polls inside blocking calls, and on machines where ranks share
// cores with the coordinator and each other, an idle spinning rank starves the busy ones.
#pragma once

#include <chrono>
#include <optional>

#include <mpi.h>

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
  // Pure MPI_Test spinning for this long before the first sleep (keeps small collectives fast).
  std::chrono::microseconds spin{20};
  std::chrono::microseconds min_sleep{4};
  std::chrono::microseconds max_sleep{1000};
  bool always_spin = false;  // never sleep (for measuring what the backoff costs and saves)
};

using SteadyClock = std::chrono::steady_clock;

// Completes `*request`. DEADLINE_EXCEEDED naming `what` if `deadline` passes first (the request is
// then left pending and the communicator that issued it must be considered broken);
// UNAVAILABLE if MPI reports an error. No deadline: wait forever (an idle follower).
Status WaitForRequest(MPI_Request* request, const WaitPolicy& policy,
                      std::optional<SteadyClock::time_point> deadline, const char* what);

}  // namespace tpserve
