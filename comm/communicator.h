// Communicator: the collectives of one tensor-parallel group. CPU implementations work on host
// buffers (MPI, or the trivial single-rank one); the NCCL one works on device buffers.
// Every call has a deadline: a dead or stuck peer becomes DEADLINE_EXCEEDED/UNAVAILABLE, not a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tpserve {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place sum over the group of `count` floats.
  virtual Status AllReduceSum(float* data, size_t count) = 0;
  // In-place sum over the group of `count` int64s: exact, so identical in any reduction order
  // (the fixed-point partial sums of the row-parallel layers). Wraps on overflow.
  virtual Status AllReduceSum(int64_t* data, size_t count) = 0;
  // out[size() * count] = concatenation of every rank's in[count], in rank order.
  virtual Status AllGather(const float* in, size_t count, float* out) = 0;
  // Root's `bytes` bytes at data reach every rank.
  virtual Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual Status Barrier() = 0;

  // Seconds spent inside collectives since construction (for step-time splits).
  virtual double collective_seconds() const = 0;
};

// The group of one: every collective is the identity.
std::unique_ptr<Communicator> MakeLocalCommunicator();

}  // namespace tpserve
