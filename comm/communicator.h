// Communicator: the collectives of one tensor-parallel group. CPU implementations work on host
// buffers (MPI, or the trivial single-rank one); the NCCL one works on device buffers.
// Every call has a deadline: a dead or stuck peer becomes DEADLINE_EXCEEDED/UNAVAILABLE, not a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  // The row-parallel layers' sum: every rank's partial[count + 1] int64s summed over the group as
  // AllReduceSum does, then out[i] = f32(sum[i]) · scale for i < count (one rounding; scale a power of
  // two keeps it one) and *tail = sum[count] (a word that rides along, e.g. a count of flags). Host
  // buffers. partial may be where SumToFloatBuffer(count) pointed: an implementation that sums in shared
  // memory then reads it in place, without a copy.
  virtual Status AllReduceSumToFloat(const int64_t* partial, size_t count, float scale, float* out, int64_t* tail);
  // Room for the count + 1 int64s of the next AllReduceSumToFloat of `count`, valid until then.
  virtual int64_t* SumToFloatBuffer(size_t count);
  // out[size() * count] = concatenation of every rank's in[count], in rank order.
  virtual Status AllGather(const float* in, size_t count, float* out) = 0;
  // Root's `bytes` bytes at data reach every rank.
  virtual Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual Status Barrier() = 0;

  // Seconds spent inside collectives since construction (for step-time splits).
  virtual double collective_seconds() const = 0;

 private:
  std::vector<int64_t> sum_to_float_buffer_;  // the default SumToFloatBuffer
};

// The group of one: every collective is the identity.
std::unique_ptr<Communicator> MakeLocalCommunicator();

}  // namespace tpserve
