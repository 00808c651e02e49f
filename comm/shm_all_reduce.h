// ShmAllReduce: the all-reduce of a group whose ranks all run on one host, through a POSIX shared-memory
// segment instead of MPI's point-to-point messages. Open MPI's non-blocking MPI_Iallreduce (libnbc,
// progressed only by our MPI_Test polls) moves 1.5 GB/s between two ranks of one host, a tenth of a
// memcpy, which made a decode step's 60 all-reduces cost TP 2 17-21 % of its step (bench/README.md,
// "Fixed-point float tiles: one term per chunk, and a shared-memory all-reduce").
//
// Each rank owns a header (the last round it posted) and two slots of `slot_bytes`, used by rounds in
// turn. A sum of up to slot_bytes is one round: copy this rank's values into its slot of the round (none
// when they are already there), publish the round number (release), wait until every rank has published
// it (acquire), then sum all slots element by element in rank order into the caller's buffer. Larger sums
// go in slot-sized rounds. A slot is free again two rounds later: every rank that published round r + 1
// had finished reading round r. Every rank adds the same values in the same order, so float sums are
// bitwise equal on every rank; int64 sums are exact (wrapping).
//
// Waits follow the communicator's WaitPolicy (poll with sched_yield, then sleeps; a PeerLiveness that
// reports a peer gone ends them at once) under its deadline: a dead peer is an error, never a hang. The
// segment is unlinked as soon as every rank has mapped it, so nothing is left in /dev/shm by a crash.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <mpi.h>

#include "comm/mpi_wait.h"
#include "common/status.h"

namespace tpserve {

class ShmAllReduce {
 public:
  // Collective over `comm`. Null (and no error) when the ranks are not all on one host or a rank could
  // not create or map the segment: the caller keeps MPI's all-reduce. Errors are MPI failures only.
  static StatusOr<std::unique_ptr<ShmAllReduce>> Create(MPI_Comm comm, size_t slot_bytes);
  ~ShmAllReduce();
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  // In-place sums of `count` values over the group. After an error the segment's state is unknown and
  // the caller must not call again.
  Status Sum(float* data, size_t count, const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline);
  Status Sum(int64_t* data, size_t count, const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline);
  // Communicator::AllReduceSumToFloat's sum of data[count + 1]. Where data is NextSlot(count + 1), it is read there.
  Status SumToFloat(const int64_t* data, size_t count, float scale, float* out, int64_t* tail,
                    const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline);
  // This rank's slot for the next round, free to write now, if `count` int64s fit in one round; else null.
  int64_t* NextSlot(size_t count) const;

 private:
  struct Header;
  ShmAllReduce(void* base, size_t mapped_bytes, size_t slot_bytes, int rank, int size)
      : base_(static_cast<char*>(base)), mapped_bytes_(mapped_bytes), slot_bytes_(slot_bytes), rank_(rank),
        size_(size) {}
  Header& header(int rank) const;
  char* slot(int rank, uint64_t round) const;
  // The rounds of the sum of data[count]: consume(offset, sources, n) for each, the size_ slots holding
  // elements [offset, offset + n) of every rank in rank order.
  template <class T, class Consume>
  Status SumRounds(const T* data, size_t count, const WaitPolicy& policy,
                   std::optional<SteadyClock::time_point> deadline, Consume consume);
  template <class T>
  Status SumInPlace(T* data, size_t count, const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline);
  // Waits until every rank has posted `round`.
  Status WaitForAll(uint64_t round, const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline) const;

  char* base_;
  size_t mapped_bytes_;
  size_t slot_bytes_;
  int rank_;
  int size_;
  uint64_t round_ = 0;  // rounds so far: the same on every rank, since every rank makes the same calls
};

}  // namespace tpserve
