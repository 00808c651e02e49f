// FloatPacker / FloatUnpacker: exact transport of integers and doubles through the float-typed
// collectives of Communicator (AllGather moves floats). Each 16-bit piece of an integer travels as
// one float holding an integer in [0, 65535], which every float represents exactly and no
// collective implementation can alter; floats themselves travel as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/check.h"

namespace tpserve {

using uint128 = unsigned __int128;

class FloatPacker {
 public:
  void PushFloat(float v) { data_.push_back(v); }
  void PushU32(uint32_t v) { PushPieces(v, 2); }
  void PushU64(uint64_t v) { PushPieces(v, 4); }
  void PushU128(uint128 v) {
    PushU64(static_cast<uint64_t>(v));
    PushU64(static_cast<uint64_t>(v >> 64));
  }
  void PushDouble(double v) { PushU64(__builtin_bit_cast(uint64_t, v)); }

  const std::vector<float>& data() const { return data_; }
  size_t size() const { return data_.size(); }

 private:
  void PushPieces(uint64_t v, int num_pieces) {
    for (int i = 0; i < num_pieces; ++i) data_.push_back(static_cast<float>((v >> (16 * i)) & 0xFFFFu));
  }

  std::vector<float> data_;
};

// Reads what a FloatPacker wrote, in the same order. REQUIRES: the reads match the pushes.
class FloatUnpacker {
 public:
  FloatUnpacker(const float* data, size_t size) : data_(data), size_(size) {}

  float PopFloat() { return Next(); }
  uint32_t PopU32() { return static_cast<uint32_t>(PopPieces(2)); }
  uint64_t PopU64() { return PopPieces(4); }
  uint128 PopU128() {
    const uint128 lo = PopU64();
    return lo | (static_cast<uint128>(PopU64()) << 64);
  }
  double PopDouble() { return __builtin_bit_cast(double, PopU64()); }

  size_t position() const { return pos_; }

 private:
  float Next() {
    CHECK_LT(pos_, size_) << "read past the packed payload";
    return data_[pos_++];
  }
  uint64_t PopPieces(int num_pieces) {
    uint64_t v = 0;
    for (int i = 0; i < num_pieces; ++i) v |= static_cast<uint64_t>(Next()) << (16 * i);
    return v;
  }

  const float* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace tpserve
