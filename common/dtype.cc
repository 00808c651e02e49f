#include "common/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string>

#include "common/check.h"
#include "common/quant_block.h"

namespace tpserve {

bool IsSupportedDType(uint32_t t) {
  return std::find(std::begin(kSupportedDTypes), std::end(kSupportedDTypes), static_cast<DType>(t)) !=
         std::end(kSupportedDTypes);
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
  for (DType t : kSupportedDTypes) {
    out += (out.empty() ? "" : ", ") + std::string(GgmlTypeName(static_cast<uint32_t>(t)));
  }
  return out;
}

const char* DTypeName(DType type) {
  const char* name = IsSupportedDType(static_cast<uint32_t>(type)) ? GgmlTypeName(static_cast<uint32_t>(type)) : nullptr;
  return name != nullptr ? name : "?";
}

bool ParseDType(const std::string& name, DType* out) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType t : kSupportedDTypes) {
    std::string n = DTypeName(t);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool IsQuantized(DType type) {
  return type != DType::kF32 && type != DType::kF16 && type != DType::kBF16;
}

bool IsKQuant(DType type) {
  switch (type) {
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: return true;
    default: return false;
  }
}

int64_t DTypeBlockElems(DType type) { return IsKQuant(type) ? kSuperBlock : IsQuantized(type) ? kQuantBlock : 1; }

int64_t DTypeBlockBytes(DType type) {
  switch (type) {
    case DType::kF32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_1: return sizeof(BlockQ4_1);
    case DType::kQ5_0: return sizeof(BlockQ5_0);
    case DType::kQ5_1: return sizeof(BlockQ5_1);
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ2_K: return sizeof(BlockQ2_K);
    case DType::kQ3_K: return sizeof(BlockQ3_K);
    case DType::kQ4_K: return sizeof(BlockQ4_K);
    case DType::kQ5_K: return sizeof(BlockQ5_K);
    case DType::kQ6_K: return sizeof(BlockQ6_K);
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
    default: break;
  }
  // x = (d · scale) · q (+ m) (− dmin · min): the products are exact, the offset rounds once (quant_block.h).
  const MinKind kind = MinKindOf(type);
  QuantBlock blk;
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    DecodeQuantBlock(type, src, b, &blk);
    float* y = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock; ++j) {
      const int half = j / 16;
      const float v = (blk.d * static_cast<float>(blk.scale[half])) * static_cast<float>(blk.q[j]);
      switch (kind) {
        case MinKind::kNone: y[j] = v; break;
        case MinKind::kOffset: y[j] = v + blk.m; break;
        case MinKind::kHalves: y[j] = v - blk.dmin * static_cast<float>(blk.min[half]); break;
      }
    }
  }
}

}  // namespace tpserve
