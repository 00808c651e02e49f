// QuantizeRow: the reference quantisers. Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 round as ggml's reference
// quantisers do. The K-quants use a plain rule instead of ggml's iterative scale search: per group,
// the scale (and minimum) that spans its values, the super-block's d (and dmin) spanning those
// scales in 6 (Q4_K, Q5_K, Q3_K), 8 (Q6_K) or 4 (Q2_K) bits, then each value rounded to the
// nearest level of its group's grid. The files are valid K-quant files either way (decoders do not
// care how a scale was chosen); llama-quantize's would only be a little more accurate.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/dtype.h"

namespace tpserve {
namespace {

int Nearest(float v) { return static_cast<int>(std::lround(v)); }

// Q5_0 (x ≈ d·(q − 16), d = signed max / −16) and Q5_1 (x ≈ d·q + min), block i of dst.
void QuantizeQ5(DType type, const float* x, void* dst, int64_t i) {
  int q[kQuantBlock];
  uint16_t d16, m16 = 0;
  if (type == DType::kQ5_0) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    d16 = F32ToFp16(d);
    for (int j = 0; j < kQuantBlock; ++j) q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
  } else {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQuantBlock; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    d16 = F32ToFp16(d);
    m16 = F32ToFp16(lo);
    for (int j = 0; j < kQuantBlock; ++j) q[j] = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
  }
  uint8_t qs[kQuantBlock / 2];
  uint32_t qh = 0;
  for (int j = 0; j < kQuantBlock / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
    qh |= static_cast<uint32_t>(q[j] >> 4) << j;
    qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  if (type == DType::kQ5_0) {
    BlockQ5_0& b = static_cast<BlockQ5_0*>(dst)[i];
    b.d = d16;
    std::memcpy(b.qh, &qh, 4);
    std::memcpy(b.qs, qs, sizeof(qs));
  } else {
    BlockQ5_1& b = static_cast<BlockQ5_1*>(dst)[i];
    b.d = d16;
    b.m = m16;
    std::memcpy(b.qh, &qh, 4);
    std::memcpy(b.qs, qs, sizeof(qs));
  }
}

// One K-quant super-block as integers before packing: value v of group g is
// (d·scale[g])·(q[v] − offset) − dmin·min[g].
struct KQuantPlan {
  int group = 16;        // values per group: 32 (Q4_K, Q5_K) or 16
  int q[kSuperBlock];    // stored levels, 0..levels-1
  int scale[16];         // per group: 0..63 (Q4_K, Q5_K), 0..15 (Q2_K), -32..31 (Q3_K), -128..127 (Q6_K)
  int min[16];           // Q2_K, Q4_K, Q5_K
  uint16_t d = 0, dmin = 0;
};

// Asymmetric types (Q2_K, Q4_K, Q5_K): per group the grid [lo, hi] with lo ≤ 0, scales and mins in
// `scale_max` steps of d and dmin.
void PlanAsymmetric(const float* x, int levels, int scale_max, KQuantPlan* p) {
  const int num_groups = kSuperBlock / p->group;
  float scale_f[16], min_f[16], max_scale = 0, max_min = 0;
  for (int g = 0; g < num_groups; ++g) {
    const float* xg = x + g * p->group;
    float lo = 0.0f, hi = xg[0];
    for (int j = 0; j < p->group; ++j) {
      lo = std::min(lo, xg[j]);
      hi = std::max(hi, xg[j]);
    }
    scale_f[g] = (hi - lo) / static_cast<float>(levels - 1);
    min_f[g] = -lo;
    max_scale = std::max(max_scale, scale_f[g]);
    max_min = std::max(max_min, min_f[g]);
  }
  p->d = F32ToFp16(max_scale / static_cast<float>(scale_max));
  p->dmin = F32ToFp16(max_min / static_cast<float>(scale_max));
  const float d = Fp16ToF32(p->d), dmin = Fp16ToF32(p->dmin);
  for (int g = 0; g < num_groups; ++g) {
    p->scale[g] = d > 0 ? std::clamp(Nearest(scale_f[g] / d), 0, scale_max) : 0;
    p->min[g] = dmin > 0 ? std::clamp(Nearest(min_f[g] / dmin), 0, scale_max) : 0;
    const float step = d * static_cast<float>(p->scale[g]), offset = dmin * static_cast<float>(p->min[g]);
    for (int j = 0; j < p->group; ++j) {
      const int v = g * p->group + j;
      p->q[v] = step > 0 ? std::clamp(Nearest((x[v] + offset) / step), 0, levels - 1) : 0;
    }
  }
}

// Symmetric types (Q3_K: levels −4..3, Q6_K: −32..31): per group the scale that maps the value of
// largest magnitude to −half (ggml's sign convention), scales in [−scale_max − 1, scale_max] steps of d.
void PlanSymmetric(const float* x, int half, int scale_max, KQuantPlan* p) {
  const int num_groups = kSuperBlock / p->group;
  float scale_f[16], max_abs_scale = 0;
  for (int g = 0; g < num_groups; ++g) {
    float amax = 0, max = 0;
    for (int j = 0; j < p->group; ++j) {
      const float v = x[g * p->group + j];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        max = v;
      }
    }
    scale_f[g] = max / static_cast<float>(-half);
    max_abs_scale = std::max(max_abs_scale, std::fabs(scale_f[g]));
  }
  p->d = F32ToFp16(max_abs_scale / static_cast<float>(scale_max));
  const float d = Fp16ToF32(p->d);
  for (int g = 0; g < num_groups; ++g) {
    p->scale[g] = d > 0 ? std::clamp(Nearest(scale_f[g] / d), -scale_max - 1, scale_max) : 0;
    p->min[g] = 0;
    const float step = d * static_cast<float>(p->scale[g]);
    for (int j = 0; j < p->group; ++j) {
      const int v = g * p->group + j;
      p->q[v] = (step != 0 ? std::clamp(Nearest(x[v] / step), -half, half - 1) : 0) + half;
    }
  }
}

// Q4_K/Q5_K's 12 bytes of 6-bit scales and mins (the inverse of KQuantScaleMin).
void PackScaleMin(const int* scale, const int* min, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] |= static_cast<uint8_t>(scale[j]);
      out[j + 4] |= static_cast<uint8_t>(min[j]);
    } else {
      out[j + 4] = static_cast<uint8_t>((scale[j] & 0xf) | ((min[j] & 0xf) << 4));
      out[j - 4] |= static_cast<uint8_t>((scale[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((min[j] >> 4) << 6);
    }
  }
}

void QuantizeKQuant(DType type, const float* x, void* dst, int64_t i) {
  KQuantPlan p;
  switch (type) {
    case DType::kQ2_K: {
      PlanAsymmetric(x, 4, 15, &p);
      BlockQ2_K& b = static_cast<BlockQ2_K*>(dst)[i];
      std::memset(&b, 0, sizeof(b));
      for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(p.scale[g] | (p.min[g] << 4));
      // Value 128h + 32k + l: bits 2k..2k+1 of qs[32h + l].
      for (int v = 0; v < kSuperBlock; ++v) b.qs[32 * (v / 128) + v % 32] |= static_cast<uint8_t>(p.q[v] << (2 * (v % 128 / 32)));
      b.d = p.d;
      b.dmin = p.dmin;
      return;
    }
    case DType::kQ3_K: {
      PlanSymmetric(x, 4, 31, &p);
      BlockQ3_K& b = static_cast<BlockQ3_K*>(dst)[i];
      std::memset(&b, 0, sizeof(b));
      for (int g = 0; g < 16; ++g) {
        const int biased = p.scale[g] + 32;  // Q3KScale's inverse
        if (g < 8) b.scales[g] |= static_cast<uint8_t>(biased & 0xf);
        else b.scales[g - 8] |= static_cast<uint8_t>((biased & 0xf) << 4);
        b.scales[8 + g % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (g / 4)));
      }
      // Value 128h + 32k + l (group s = 4h + k): bits 2k.. of qs[32h + l], high bit as bit s of hmask[l].
      for (int v = 0; v < kSuperBlock; ++v) {
        const int s = v / 32, l = v % 32;
        b.qs[32 * (s / 4) + l] |= static_cast<uint8_t>((p.q[v] & 3) << (2 * (s % 4)));
        if (p.q[v] >= 4) b.hmask[l] |= static_cast<uint8_t>(1 << s);
      }
      b.d = p.d;
      return;
    }
    case DType::kQ4_K: case DType::kQ5_K: {
      const bool q5 = type == DType::kQ5_K;
      p.group = 32;
      PlanAsymmetric(x, q5 ? 32 : 16, 63, &p);
      uint8_t scales[12], qs[kSuperBlock / 2] = {}, qh[kSuperBlock / 8] = {};
      PackScaleMin(p.scale, p.min, scales);
      for (int v = 0; v < kSuperBlock; ++v) {
        const int s = v / 32, l = v % 32;
        qs[32 * (s / 2) + l] |= static_cast<uint8_t>((p.q[v] & 0xf) << (4 * (s % 2)));
        qh[l] |= static_cast<uint8_t>((p.q[v] >> 4) << s);
      }
      if (q5) {
        BlockQ5_K& b = static_cast<BlockQ5_K*>(dst)[i];
        b.d = p.d;
        b.dmin = p.dmin;
        std::memcpy(b.scales, scales, 12);
        std::memcpy(b.qh, qh, sizeof(qh));
        std::memcpy(b.qs, qs, sizeof(qs));
      } else {
        BlockQ4_K& b = static_cast<BlockQ4_K*>(dst)[i];
        b.d = p.d;
        b.dmin = p.dmin;
        std::memcpy(b.scales, scales, 12);
        std::memcpy(b.qs, qs, sizeof(qs));
      }
      return;
    }
    case DType::kQ6_K: {
      PlanSymmetric(x, 32, 127, &p);
      BlockQ6_K& b = static_cast<BlockQ6_K*>(dst)[i];
      std::memset(&b, 0, sizeof(b));
      for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(p.scale[g]);
      // Value 128h + 32k + l: nibble k / 2 of ql[64h + 32·(k % 2) + l], bits 2k.. of qh[32h + l].
      for (int v = 0; v < kSuperBlock; ++v) {
        const int h = v / 128, k = v % 128 / 32, l = v % 32;
        b.ql[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((p.q[v] & 0xf) << (4 * (k / 2)));
        b.qh[32 * h + l] |= static_cast<uint8_t>((p.q[v] >> 4) << (2 * k));
      }
      b.d = p.d;
      return;
    }
    default: break;
  }
  CHECK(false) << "not a K-quant";
}

}  // namespace

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToFp16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBf16(src[i]);
      return;
    }
    case DType::kQ8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float* x = src + i * kQuantBlock;
        float amax = 0;
        for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = F32ToFp16(d);
        for (int j = 0; j < kQuantBlock; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
      }
      return;
    }
    case DType::kQ4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float* x = src + i * kQuantBlock;
        float amax = 0, max = 0;
        for (int j = 0; j < kQuantBlock; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = F32ToFp16(d);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
          const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
          b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      return;
    }
    case DType::kQ4_1: {
      auto* b = static_cast<BlockQ4_1*>(dst);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float* x = src + i * kQuantBlock;
        float lo = x[0], hi = x[0];
        for (int j = 1; j < kQuantBlock; ++j) {
          lo = std::min(lo, x[j]);
          hi = std::max(hi, x[j]);
        }
        const float d = (hi - lo) / 15.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = F32ToFp16(d);
        b[i].m = F32ToFp16(lo);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
          const int q1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
          b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      return;
    }
    case DType::kQ5_0: case DType::kQ5_1:
      for (int64_t i = 0; i < n / kQuantBlock; ++i) QuantizeQ5(type, src + i * kQuantBlock, dst, i);
      return;
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
      for (int64_t i = 0; i < n / kSuperBlock; ++i) QuantizeKQuant(type, src + i * kSuperBlock, dst, i);
      return;
  }
  CHECK(false) << "bad dtype";
}

}  // namespace tpserve
