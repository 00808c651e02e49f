#include "comm/mpi_wait.h"

#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>

namespace tpserve {

Status MpiError(const char* what, int rc, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  return Unavailable(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     std::string(text, static_cast<size_t>(length)));
}

Status WaitUntil(const std::function<StatusOr<bool>()>& done, const WaitPolicy& policy,
                 std::optional<SteadyClock::time_point> deadline, const char* what) {
  const SteadyClock::time_point start = SteadyClock::now();
  std::chrono::microseconds sleep = policy.min_sleep;
  for (;;) {
    ASSIGN_OR_RETURN(const bool finished, done());
    if (finished) return OkStatus();
    if (policy.liveness != nullptr) RETURN_IF_ERROR(policy.liveness->Check());
    const SteadyClock::time_point now = SteadyClock::now();
    if (deadline && now >= *deadline) {
      const double waited = std::chrono::duration<double>(now - start).count();
      return DeadlineExceeded(std::string(what) + " did not complete within " + std::to_string(waited) +
                              " s (a peer is stuck or gone)");
    }
    if (policy.always_spin || now - start < policy.spin) {
      sched_yield();  // polls, but hands the core over when another thread or rank of this host needs it
      continue;
    }
    std::chrono::microseconds nap = sleep;
    if (deadline) {
      nap = std::min(nap, std::chrono::duration_cast<std::chrono::microseconds>(*deadline - now) +
                              std::chrono::microseconds(1));
    }
    std::this_thread::sleep_for(nap);
    sleep = std::min(sleep * 2, policy.max_sleep);
  }
}

Status WaitForRequest(MPI_Request* request, const WaitPolicy& policy,
                      std::optional<SteadyClock::time_point> deadline, const char* what) {
  return WaitUntil(
      [request]() -> StatusOr<bool> {
        int done = 0;
        MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      policy, deadline, what);
}

}  // namespace tpserve
