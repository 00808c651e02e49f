#include "comm/mpi_communicator.h"

#include <climits>
#include <cstdint>
#include <utility>

namespace tpserve {
namespace {

// MPI counts are int: collectives over more elements than INT_MAX go in chunks.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX);

}  // namespace

StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(MPI_Comm comm,
                                                                    const MpiCommunicatorOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  CHECK(initialized) << "MpiCommunicator::Create before MPI_Init";
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(comm, &dup));
  MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(dup, &rank));
  MPI_CHECK(MPI_Comm_size(dup, &size));
  ASSIGN_OR_RETURN(std::unique_ptr<ShmAllReduce> shm, ShmAllReduce::Create(dup, options.shared_memory_slot_bytes));
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(dup, rank, size, options, std::move(shm)));
}

MpiCommunicator::~MpiCommunicator() {
  // Freeing a communicator with a collective in flight is unsafe; a broken one is left to exit.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (broken_.ok() && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status MpiCommunicator::Finish(MPI_Request* request, const char* what,
                               std::optional<std::chrono::milliseconds> deadline, bool timed,
                               SteadyClock::time_point start) {
  std::optional<SteadyClock::time_point> until;
  if (deadline) until = start + *deadline;
  Status status = WaitForRequest(request, options_.wait, until, what);
  if (timed) return Settle(std::move(status), start);
  if (!status.ok()) broken_ = status;
  return status;
}

Status MpiCommunicator::Settle(Status status, SteadyClock::time_point start) {
  collective_seconds_ += std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (!status.ok()) broken_ = status;
  return status;
}

Status MpiCommunicator::AllReduceSum(float* data, size_t count) { return AllReduceSumOf(data, count, MPI_FLOAT); }

Status MpiCommunicator::AllReduceSum(int64_t* data, size_t count) {
  return AllReduceSumOf(data, count, MPI_INT64_T);
}

Status MpiCommunicator::AllReduceSumToFloat(const int64_t* partial, size_t count, float scale, float* out,
                                            int64_t* tail) {
  if (shm_ == nullptr) return Communicator::AllReduceSumToFloat(partial, count, scale, out, tail);
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  return Settle(shm_->SumToFloat(partial, count, scale, out, tail, options_.wait, start + options_.deadline), start);
}

int64_t* MpiCommunicator::SumToFloatBuffer(size_t count) {
  int64_t* slot = shm_ != nullptr ? shm_->NextSlot(count + 1) : nullptr;
  return slot != nullptr ? slot : Communicator::SumToFloatBuffer(count);
}

template <class T>
Status MpiCommunicator::AllReduceSumOf(T* data, size_t count, MPI_Datatype type) {
  RETURN_IF_ERROR(broken_);
  if (size_ == 1) return OkStatus();
  const SteadyClock::time_point start = SteadyClock::now();
  if (shm_ != nullptr) return Settle(shm_->Sum(data, count, options_.wait, start + options_.deadline), start);
  for (size_t offset = 0; offset < count; offset += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - offset));
    MPI_Request request;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + offset, n, type, MPI_SUM, comm_, &request));
    RETURN_IF_ERROR(Finish(&request, "MPI all-reduce", options_.deadline, true, start));
  }
  return OkStatus();
}

Status MpiCommunicator::AllGather(const float* in, size_t count, float* out) {
  RETURN_IF_ERROR(broken_);
  if (count > kMaxChunk) return InvalidArgument("MPI all-gather of more than INT_MAX floats per rank");
  const SteadyClock::time_point start = SteadyClock::now();
  MPI_Request request;
  const void* send = (in == out + static_cast<size_t>(rank_) * count) ? MPI_IN_PLACE : in;
  MPI_CHECK(MPI_Iallgather(send, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT,
                           comm_, &request));
  return Finish(&request, "MPI all-gather", options_.deadline, true, start);
}

Status MpiCommunicator::Broadcast(void* data, size_t bytes, int root) {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  char* p = static_cast<char*>(data);
  for (size_t offset = 0; offset < bytes || offset == 0; offset += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, bytes - offset));
    MPI_Request request;
    MPI_CHECK(MPI_Ibcast(p + offset, n, MPI_BYTE, root, comm_, &request));
    RETURN_IF_ERROR(Finish(&request, "MPI broadcast", options_.deadline, true, start));
    if (bytes == 0) break;
  }
  return OkStatus();
}

Status MpiCommunicator::BroadcastWaiting(void* data, size_t bytes, int root,
                                         std::optional<std::chrono::milliseconds> deadline) {
  RETURN_IF_ERROR(broken_);
  if (bytes > kMaxChunk) return InvalidArgument("BroadcastWaiting of more than INT_MAX bytes");
  const SteadyClock::time_point start = SteadyClock::now();
  MPI_Request request;
  MPI_CHECK(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_, &request));
  return Finish(&request, "MPI broadcast (waiting)", deadline, false, start);
}

Status MpiCommunicator::AllReduceMaxInt64(int64_t* data, size_t count) {
  RETURN_IF_ERROR(broken_);
  if (count > kMaxChunk) return InvalidArgument("AllReduceMaxInt64 of more than INT_MAX values");
  const SteadyClock::time_point start = SteadyClock::now();
  MPI_Request request;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_INT64_T, MPI_MAX, comm_, &request));
  return Finish(&request, "MPI all-reduce max", options_.deadline, true, start);
}

Status MpiCommunicator::Barrier() {
  RETURN_IF_ERROR(broken_);
  const SteadyClock::time_point start = SteadyClock::now();
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm_, &request));
  return Finish(&request, "MPI barrier", options_.deadline, true, start);
}

}  // namespace tpserve
