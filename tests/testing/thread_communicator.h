// ThreadGroup: an in-process fake of a tensor-parallel group. N ranks run on N threads and meet in
// collectives through shared memory, so multi-rank logic is testable in a plain GoogleTest binary
// without mpirun. Every collective combines in rank order, so results are deterministic.
// A rank that waits longer than the timeout in a collective gets DEADLINE_EXCEEDED (a rank that
// never arrives, e.g. one that returned early on an error, becomes a test failure, not a hang).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace tpserve::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int size() const;
  // Runs fn(comm of rank r) on one thread per rank r and returns when all have returned.
  void Run(const std::function<void(Communicator& comm)>& fn);

  struct Shared;  // the meeting point of the ranks (thread_communicator.cc)

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> comms_;  // [size]
};

}  // namespace tpserve::testing
