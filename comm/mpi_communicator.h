// Communicator over MPI for host buffers; on one host, sums through shared memory instead
// (comm/shm_all_reduce.h). Every other collective is a non-blocking MPI call completed by
// WaitForRequest (comm/mpi_wait.h): idle ranks back off instead of spinning, and a peer that never
// joins becomes DEADLINE_EXCEEDED after `deadline`. After any failed collective the communicator is
// broken (a collective may still be in flight) and every later call returns the first error: the
// process should report it and exit.
//
// Thread-compatible, not thread-safe: one thread makes all calls (MPI_THREAD_FUNNELED suffices).
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <mpi.h>

#include "comm/communicator.h"
#include "comm/mpi_wait.h"
#include "comm/shm_all_reduce.h"

namespace tpserve {

struct MpiCommunicatorOptions {
  std::chrono::milliseconds deadline{30000};  // per collective
  WaitPolicy wait;
  // Sums go through a shared-memory segment (comm/shm_all_reduce.h) in rounds of this many bytes per
  // rank when every rank runs on one host; 0: always MPI's all-reduce.
  size_t shared_memory_slot_bytes = size_t{1} << 20;
};

class MpiCommunicator : public Communicator {
 public:
  // Duplicates `comm` (so our traffic never matches anyone else's) with MPI_ERRORS_RETURN, and maps the
  // shared-memory segment of its sums where every rank runs on one host.
  // REQUIRES: MPI is initialised; collective over `comm`.
  static StatusOr<std::unique_ptr<MpiCommunicator>> Create(MPI_Comm comm, const MpiCommunicatorOptions& options = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(float* data, size_t count) override;               // data: [count]
  Status AllReduceSum(int64_t* data, size_t count) override;             // data: [count]
  Status AllReduceSumToFloat(const int64_t* partial, size_t count, float scale, float* out, int64_t* tail) override;
  int64_t* SumToFloatBuffer(size_t count) override;  // the shared-memory slot of the next round where it fits
  Status AllGather(const float* in, size_t count, float* out) override;  // in: [count], out: [size * count]
  Status Broadcast(void* data, size_t bytes, int root) override;
  Status Barrier() override;
  double collective_seconds() const override { return collective_seconds_; }

  // Broadcast with an explicit deadline; std::nullopt waits forever (a follower idling for the
  // next plan). Not counted in collective_seconds (idle time is not step time).
  Status BroadcastWaiting(void* data, size_t bytes, int root,
                          std::optional<std::chrono::milliseconds> deadline);
  // Int64 max over the group (for agreeing on sizes and error flags).
  Status AllReduceMaxInt64(int64_t* data, size_t count);

  MPI_Comm comm() const { return comm_; }
  bool shared_memory() const { return shm_ != nullptr; }  // sums through comm/shm_all_reduce.h
  const MpiCommunicatorOptions& options() const { return options_; }
  void set_deadline(std::chrono::milliseconds deadline) { options_.deadline = deadline; }

 private:
  MpiCommunicator(MPI_Comm comm, int rank, int size, const MpiCommunicatorOptions& options,
                  std::unique_ptr<ShmAllReduce> shm)
      : comm_(comm), rank_(rank), size_(size), options_(options), shm_(std::move(shm)) {}
  // The in-place sum of `count` elements of T: through shm_ where there is one, else MPI's in chunks of
  // INT_MAX elements of `type`.
  template <class T>
  Status AllReduceSumOf(T* data, size_t count, MPI_Datatype type);
  // The end of a shared-memory sum begun at `start`: its time counted, a failure kept in broken_.
  Status Settle(Status status, SteadyClock::time_point start);
  // Waits for `request` under the deadline, accumulating collective_seconds when `timed`.
  Status Finish(MPI_Request* request, const char* what, std::optional<std::chrono::milliseconds> deadline,
                bool timed, SteadyClock::time_point start);

  MPI_Comm comm_;
  int rank_;
  int size_;
  MpiCommunicatorOptions options_;
  std::unique_ptr<ShmAllReduce> shm_;  // null: sums through MPI
  double collective_seconds_ = 0;
  Status broken_;  // the first failure; OK while healthy
};

}  // namespace tpserve
