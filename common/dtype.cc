#include "common/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string>

#include "common/check.h"

namespace tpserve {

bool IsSupportedDType(uint32_t t) {
  switch (static_cast<DType>(t)) {
    case DType::kF32: case DType::kF16: case DType::kQ4_0: case DType::kQ4_1: case DType::kQ8_0:
    case DType::kBF16:
      return true;
  }
  return false;
}

const char* GgmlTypeName(uint32_t ggml_type) {
  // ggml.h's enum ggml_type; ids 4, 5 (Q4_2, Q4_3) and 31..33 (Q4_0_4_4 ...) were removed from it.
  static constexpr const char* kNames[] = {
      "F32",     "F16",    "Q4_0",   "Q4_1",   nullptr, nullptr,  "Q5_0",  "Q5_1", "Q8_0",   "Q8_1",
      "Q2_K",    "Q3_K",   "Q4_K",   "Q5_K",   "Q6_K",  "Q8_K",   "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL",  "IQ3_S",  "IQ2_S",  "IQ4_XS", "I8",    "I16",    "I32",   "I64",  "F64",    "IQ1_M",
      "BF16",    nullptr,  nullptr,  nullptr,  "TQ1_0", "TQ2_0",  nullptr, nullptr, nullptr,  "MXFP4"};
  return ggml_type < std::size(kNames) ? kNames[ggml_type] : nullptr;
}

std::string SupportedDTypeList() {
  std::string out;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    out += (out.empty() ? "" : ", ") + std::string(GgmlTypeName(static_cast<uint32_t>(t)));
  }
  return out;
}

const char* DTypeName(DType type) {
  switch (type) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_1: return "Q4_1";
    case DType::kQ8_0: return "Q8_0";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

bool ParseDType(const std::string& name, DType* out) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    std::string n = DTypeName(t);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool IsQuantized(DType type) { return type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ8_0; }

int64_t DTypeBlockElems(DType type) { return IsQuantized(type) ? kQuantBlock : 1; }

int64_t DTypeBlockBytes(DType type) {
  switch (type) {
    case DType::kF32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_1: return sizeof(BlockQ4_1);
    case DType::kQ8_0: return sizeof(BlockQ8_0);
  }
  CHECK(false) << "bad dtype";
  return 0;
}

int64_t DTypeRowBytes(DType type, int64_t n) {
  const int64_t be = DTypeBlockElems(type);
  CHECK_EQ(n % be, 0);
  return n / be * DTypeBlockBytes(type);
}

#if defined(__FLT16_MANT_DIG__)
// GCC (12+) and Clang (15+) on x86-64 provide _Float16 with IEEE round-to-nearest-even conversions.
float Fp16ToF32(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

uint16_t F32ToFp16(float f) {
  const _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#else
// Compilers without _Float16 (Clang 14, used by the fuzz build): the same IEEE conversions by hand.
float Fp16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float magnitude;
  if (exp == 0x1f) {
    const uint32_t bits = man == 0 ? 0x7f800000 : 0x7fc00000 | (man << 13);  // inf, or a quiet NaN with its payload
    std::memcpy(&magnitude, &bits, 4);
  } else {
    magnitude = std::ldexp(static_cast<float>(exp == 0 ? man : (man | 0x400)), exp == 0 ? -24 : static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t F32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((x >> 13) & 0x3ff));  // quiet NaN
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf (>= 65520)
  if (x == 0) return sign;
  float a;
  std::memcpy(&a, &x, 4);
  // Scale so the half's last place is 1 (subnormal spacing 2^-24, normal spacing 2^(e-10)), then
  // round to nearest even in f32 arithmetic, which is exact for these magnitudes.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int shift = e - 1 < -14 ? 24 : 10 - (e - 1);
  const float scaled = std::nearbyint(std::ldexp(a, shift));
  const uint32_t units = static_cast<uint32_t>(scaled);
  if (e - 1 < -14) return static_cast<uint16_t>(sign | units);  // subnormal (or 0x400: the smallest normal)
  // Normal: units in [1024, 2048]; 2048 carries into the exponent.
  const uint32_t exp = static_cast<uint32_t>(e - 1 + 15) + (units >> 11);
  return static_cast<uint16_t>(sign | (exp << 10) | (units & 0x3ff));
}
#endif

uint16_t F32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToF32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToF32(b[i].d);
        for (int j = 0; j < kQuantBlock; ++j) dst[i * kQuantBlock + j] = d * b[i].qs[j];
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToF32(b[i].d);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          dst[i * kQuantBlock + j] = d * ((b[i].qs[j] & 0xf) - 8);
          dst[i * kQuantBlock + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToF32(b[i].d);
        const float m = Fp16ToF32(b[i].m);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          dst[i * kQuantBlock + j] = d * (b[i].qs[j] & 0xf) + m;
          dst[i * kQuantBlock + j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
      }
      return;
    }
  }
  CHECK(false) << "bad dtype";
}

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
  }
  CHECK(false) << "bad dtype";
}

}  // namespace tpserve
