#include "common/quant_block.h"

#include <cstring>

#include "common/check.h"

namespace tpserve {

namespace {

// Nibbles of a 16-byte array in Q4_0's order: value j < 16 is byte j's low nibble, j + 16 its high one.
void SplitNibbles(const uint8_t* qs, int offset, int8_t* q) {
  for (int j = 0; j < kQuantBlock / 2; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0xf) - offset);
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}

// Q5_0/Q5_1: adds bit j of the little-endian qh to value j as its fifth bit.
void AddFifthBits(const uint8_t* qh_bytes, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < kQuantBlock; ++j) q[j] = static_cast<int8_t>(q[j] + static_cast<int>(((qh >> j) & 1) << 4));
}

// Q4_K/Q5_K group s: bytes [32·(s/2), +32) of qs, low nibbles for even s and high ones for odd s;
// Q5_K's fifth bit is bit s of qh[l]. The group's 6-bit scale folds into d, its minimum into m.
template <class Block>
void DecodeQ45K(const Block& blk, const uint8_t* qh, int s, QuantBlock* out) {
  for (int l = 0; l < kQuantBlock; ++l) {
    int v = (blk.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
    if (qh != nullptr) v |= ((qh[l] >> s) & 1) << 4;
    out->q[l] = static_cast<int8_t>(v);
  }
  int scale = 0, min = 0;
  KQuantScaleMin(blk.scales, s, &scale, &min);
  out->d = Fp16ToF32(blk.d) * static_cast<float>(scale);
  out->m = -(Fp16ToF32(blk.dmin) * static_cast<float>(min));
}

}  // namespace

void DecodeQuantBlock(DType type, const void* row, int64_t b, QuantBlock* out) {
  out->scale[0] = out->scale[1] = 1;
  out->min[0] = out->min[1] = 0;
  out->m = 0.0f;
  out->dmin = 0.0f;
  // K-quants: super-block b / 8, 32-value group s within it; half h (128 values) and quarter k of the half.
  const int s = static_cast<int>(b % 8), h = s / 4, k = s % 4;
  switch (type) {
    case DType::kQ8_0: {
      const auto& blk = static_cast<const BlockQ8_0*>(row)[b];
      std::memcpy(out->q, blk.qs, kQuantBlock);
      out->d = Fp16ToF32(blk.d);
      return;
    }
    case DType::kQ4_0: {
      const auto& blk = static_cast<const BlockQ4_0*>(row)[b];
      SplitNibbles(blk.qs, 8, out->q);
      out->d = Fp16ToF32(blk.d);
      return;
    }
    case DType::kQ4_1: {
      const auto& blk = static_cast<const BlockQ4_1*>(row)[b];
      SplitNibbles(blk.qs, 0, out->q);
      out->d = Fp16ToF32(blk.d);
      out->m = Fp16ToF32(blk.m);
      return;
    }
    case DType::kQ5_0: {
      const auto& blk = static_cast<const BlockQ5_0*>(row)[b];
      SplitNibbles(blk.qs, 0, out->q);
      AddFifthBits(blk.qh, out->q);
      for (int8_t& v : out->q) v = static_cast<int8_t>(v - 16);
      out->d = Fp16ToF32(blk.d);
      return;
    }
    case DType::kQ5_1: {
      const auto& blk = static_cast<const BlockQ5_1*>(row)[b];
      SplitNibbles(blk.qs, 0, out->q);
      AddFifthBits(blk.qh, out->q);
      out->d = Fp16ToF32(blk.d);
      out->m = Fp16ToF32(blk.m);
      return;
    }
    case DType::kQ2_K: {
      const auto& blk = static_cast<const BlockQ2_K*>(row)[b / 8];
      for (int l = 0; l < kQuantBlock; ++l) out->q[l] = static_cast<int8_t>((blk.qs[32 * h + l] >> (2 * k)) & 3);
      for (int half = 0; half < 2; ++half) {
        out->scale[half] = blk.scales[2 * s + half] & 0xf;
        out->min[half] = blk.scales[2 * s + half] >> 4;
      }
      out->d = Fp16ToF32(blk.d);
      out->dmin = Fp16ToF32(blk.dmin);
      return;
    }
    case DType::kQ3_K: {
      const auto& blk = static_cast<const BlockQ3_K*>(row)[b / 8];
      const int hbit = 1 << s;  // group s's bit of hmask (4h + k = s)
      for (int l = 0; l < kQuantBlock; ++l) {
        out->q[l] = static_cast<int8_t>(((blk.qs[32 * h + l] >> (2 * k)) & 3) - ((blk.hmask[l] & hbit) ? 0 : 4));
      }
      for (int half = 0; half < 2; ++half) out->scale[half] = Q3KScale(blk.scales, 2 * s + half) - 32;
      out->d = Fp16ToF32(blk.d);
      return;
    }
    case DType::kQ4_K: DecodeQ45K(static_cast<const BlockQ4_K*>(row)[b / 8], nullptr, s, out); return;
    case DType::kQ5_K: {
      const auto& blk = static_cast<const BlockQ5_K*>(row)[b / 8];
      DecodeQ45K(blk, blk.qh, s, out);
      return;
    }
    case DType::kQ6_K: {
      const auto& blk = static_cast<const BlockQ6_K*>(row)[b / 8];
      // Quarter k of half h: low nibbles (k < 2) or high nibbles of ql[64h + 32·(k % 2) + l], bits 2k..2k+1 of qh[32h + l].
      for (int l = 0; l < kQuantBlock; ++l) {
        const int low = (blk.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xf;
        const int high = (blk.qh[32 * h + l] >> (2 * k)) & 3;
        out->q[l] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
      for (int half = 0; half < 2; ++half) out->scale[half] = blk.scales[2 * s + half];
      out->d = Fp16ToF32(blk.d);
      return;
    }
    default: break;
  }
  CHECK(false) << "not a quantised type: " << DTypeName(type);
}

}  // namespace tpserve
