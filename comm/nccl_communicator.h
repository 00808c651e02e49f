// Communicator over NCCL for device buffers (built only when CUDA and NCCL are found).
//
// The group is built once: rank 0 makes the ncclUniqueId and the MPI bootstrap communicator
// broadcasts it, then every rank calls ncclCommInitRankConfig with a non-blocking config. Every
// NCCL call is then polled (ncclCommGetAsyncError, cudaStreamQuery) with the same backoff as the
// MPI path, under a deadline: a peer that never joins or dies mid-collective makes this rank abort
// the communicator (ncclCommAbort) and return DEADLINE_EXCEEDED / UNAVAILABLE instead of hanging
// a stream forever. After a failure the communicator is broken and every call returns that error.
//
// Collectives are synchronous with respect to the host: they return once the result is in the
// device buffer (the stream is drained), matching the Communicator contract.
#pragma once

#include <chrono>
#include <memory>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace tpserve {

// NCCL_CHECK(call): on a result other than ncclSuccess (or ncclInProgress, which non-blocking
// communicators return while work is pending) returns from the enclosing function with
// UNAVAILABLE naming the call, file:line and ncclGetErrorString.
#define NCCL_CHECK(call)                                                          \
  do {                                                                            \
    ncclResult_t _nccl_rc = (call);                                               \
    if (_nccl_rc != ncclSuccess && _nccl_rc != ncclInProgress) {                  \
      return ::tpserve::NcclError(#call, _nccl_rc, __FILE__, __LINE__);           \
    }                                                                             \
  } while (0)

Status NcclError(const char* what, ncclResult_t rc, const char* file, int line);

struct NcclCommunicatorOptions {
  std::chrono::milliseconds deadline{30000};  // per collective, and for communicator creation
  WaitPolicy wait;
};

class NcclCommunicator : public Communicator {
 public:
  // REQUIRES: this rank's device is current (cudaSetDevice); collective over `bootstrap`, whose
  // rank and size become the NCCL group's. `stream` is where collectives run (nullptr: a stream
  // of our own).
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(MpiCommunicator* bootstrap, cudaStream_t stream,
                                                            const NcclCommunicatorOptions& options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // All pointers are device pointers.
  Status AllReduceSum(float* data, size_t count) override;               // data: [count]
  Status AllReduceSum(int64_t* data, size_t count) override;             // data: [count]
  Status AllGather(const float* in, size_t count, float* out) override;  // in: [count], out: [size * count]
  Status Broadcast(void* data, size_t bytes, int root) override;
  // Drains the stream, then an MPI barrier over the bootstrap communicator.
  Status Barrier() override;
  double collective_seconds() const override { return collective_seconds_; }

  cudaStream_t stream() const { return stream_; }

 private:
  NcclCommunicator(MpiCommunicator* bootstrap, int rank, int size, const NcclCommunicatorOptions& options)
      : bootstrap_(bootstrap), rank_(rank), size_(size), options_(options) {}
  // Polls until the enqueue of the last NCCL call is done and the stream has drained, or the
  // deadline passes (then aborts the communicator). Accumulates collective_seconds.
  Status Complete(const char* what, SteadyClock::time_point start);
  // Polls ncclCommGetAsyncError until it is no longer ncclInProgress.
  Status WaitNotInProgress(const char* what, SteadyClock::time_point deadline);
  // UNAVAILABLE, the communicator aborted, when options_.wait.liveness reports a peer gone (a peer
  // stopped or cut off inside a collective would otherwise hold this rank until the deadline).
  Status AbortIfPeerLost(const char* what);
  Status Fail(Status status);

  MpiCommunicator* bootstrap_;
  int rank_;
  int size_;
  NcclCommunicatorOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  double collective_seconds_ = 0;
  Status broken_;
};

}  // namespace tpserve
