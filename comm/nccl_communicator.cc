#include "comm/nccl_communicator.h"

#include <algorithm>
#include <string>
#include <thread>

namespace tpserve {
namespace {

Status CudaError(const char* what, cudaError_t rc, const char* file, int line) {
  return Unavailable(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     cudaGetErrorString(rc));
}

#define NCCL_COMM_CUDA_CHECK(call)                                        \
  do {                                                                    \
    cudaError_t _cuda_rc = (call);                                        \
    if (_cuda_rc != cudaSuccess) return CudaError(#call, _cuda_rc, __FILE__, __LINE__); \
  } while (0)

// Sleeps per the policy's backoff schedule; `sleep` carries the state between calls.
void BackOff(const WaitPolicy& policy, SteadyClock::time_point start, std::chrono::microseconds* sleep) {
  if (policy.always_spin || SteadyClock::now() - start < policy.spin) return;
  std::this_thread::sleep_for(*sleep);
  *sleep = std::min(*sleep * 2, policy.max_sleep);
}

}  // namespace

Status NcclError(const char* what, ncclResult_t rc, const char* file, int line) {
  return Unavailable(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     ncclGetErrorString(rc));
}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(MpiCommunicator* bootstrap,
                                                                      cudaStream_t stream,
                                                                      const NcclCommunicatorOptions& options) {
  CHECK(bootstrap != nullptr);
  std::unique_ptr<NcclCommunicator> result(
      new NcclCommunicator(bootstrap, bootstrap->rank(), bootstrap->size(), options));
  if (stream == nullptr) {
    NCCL_COMM_CUDA_CHECK(cudaStreamCreateWithFlags(&result->stream_, cudaStreamNonBlocking));
    result->owns_stream_ = true;
  } else {
    result->stream_ = stream;
  }

  // Rank 0 makes the id; the MPI bootstrap shares it (the one place MPI carries NCCL setup).
  ncclUniqueId id;
  if (result->rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  RETURN_IF_ERROR(bootstrap->Broadcast(&id, sizeof(id), 0));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return ncclInProgress; we poll, so a dead peer cannot hang us
  const SteadyClock::time_point start = SteadyClock::now();
  NCCL_CHECK(ncclCommInitRankConfig(&result->comm_, result->size_, id, result->rank_, &config));
  RETURN_IF_ERROR(result->WaitNotInProgress("ncclCommInitRankConfig", start + options.deadline));
  return result;
}

NcclCommunicator::~NcclCommunicator() {
  // A healthy communicator is flushed then freed, bounded by the deadline like everything else;
  // a broken one was already aborted by Fail().
  if (comm_ != nullptr && broken_.ok()) {
    ncclResult_t rc = ncclCommFinalize(comm_);
    Status flushed = (rc == ncclSuccess || rc == ncclInProgress)
                         ? WaitNotInProgress("ncclCommFinalize", SteadyClock::now() + options_.deadline)
                         : Fail(NcclError("ncclCommFinalize", rc, __FILE__, __LINE__));
    if (flushed.ok()) ncclCommDestroy(comm_);
  }
  if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status NcclCommunicator::Fail(Status status) {
  if (comm_ != nullptr && broken_.ok()) ncclCommAbort(comm_);
  broken_ = status;
  return status;
}

Status NcclCommunicator::AbortIfPeerLost(const char* what) {
  if (options_.wait.liveness == nullptr) return OkStatus();
  Status alive = options_.wait.liveness->Check();  // the group heartbeat, as in the MPI waits
  if (alive.ok()) return OkStatus();
  return Fail(Unavailable(std::string(what) + " abandoned: " + alive.message() + "; NCCL communicator aborted"));
}

Status NcclCommunicator::WaitNotInProgress(const char* what, SteadyClock::time_point deadline) {
  const SteadyClock::time_point start = SteadyClock::now();
  std::chrono::microseconds sleep = options_.wait.min_sleep;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess) return Fail(NcclError("ncclCommGetAsyncError", rc, __FILE__, __LINE__));
    if (state == ncclSuccess) return OkStatus();
    if (state != ncclInProgress) return Fail(NcclError(what, state, __FILE__, __LINE__));
    RETURN_IF_ERROR(AbortIfPeerLost(what));
    if (SteadyClock::now() >= deadline) {
      return Fail(DeadlineExceeded(std::string(what) + " did not complete before the deadline (a peer is "
                                   "stuck or gone); NCCL communicator aborted"));
    }
    BackOff(options_.wait, start, &sleep);
  }
}

Status NcclCommunicator::Complete(const char* what, SteadyClock::time_point start) {
  const SteadyClock::time_point deadline = start + options_.deadline;
  RETURN_IF_ERROR(WaitNotInProgress(what, deadline));
  std::chrono::microseconds sleep = options_.wait.min_sleep;
  for (;;) {
    cudaError_t rc = cudaStreamQuery(stream_);
    if (rc == cudaSuccess) break;
    if (rc != cudaErrorNotReady) return Fail(CudaError("cudaStreamQuery", rc, __FILE__, __LINE__));
    // A peer dying mid-collective shows up here as an async error, or not at all (then the deadline).
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      return Fail(NcclError(what, state, __FILE__, __LINE__));
    }
    RETURN_IF_ERROR(AbortIfPeerLost(what));
    if (SteadyClock::now() >= deadline) {
      return Fail(DeadlineExceeded(std::string(what) + " did not finish on the stream before the deadline; "
                                   "NCCL communicator aborted"));
    }
    BackOff(options_.wait, start, &sleep);
  }
  collective_seconds_ += std::chrono::duration<double>(SteadyClock::now() - start).count();
  return OkStatus();
}

Status NcclCommunicator::AllReduceSum(float* data, size_t count) {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_));
  return Complete("ncclAllReduce", start);
}

Status NcclCommunicator::AllReduceSum(int64_t* data, size_t count) {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  NCCL_CHECK(ncclAllReduce(data, data, count, ncclInt64, ncclSum, comm_, stream_));
  return Complete("ncclAllReduce (int64)", start);
}

Status NcclCommunicator::AllGather(const float* in, size_t count, float* out) {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  NCCL_CHECK(ncclAllGather(in, out, count, ncclFloat, comm_, stream_));
  return Complete("ncclAllGather", start);
}

Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_));
  return Complete("ncclBroadcast", start);
}

Status NcclCommunicator::Barrier() {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  RETURN_IF_ERROR(Complete("stream drain before barrier", start));
  return bootstrap_->Barrier();
}

}  // namespace tpserve
