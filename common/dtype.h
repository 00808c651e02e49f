// Element types of weights, with ggml's numeric ids and block layouts (as stored in GGUF files),
// half-precision conversions, and the reference (scalar) dequantisation of one row to f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tpserve {

// Values are ggml's type ids, so a GGUF tensor's type field casts directly.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kBF16 = 30,
};

constexpr int kQuantBlock = 32;  // elements per block of every quantised type here

// Q8_0: x = d * qs[i]
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQuantBlock];
};
// Q4_0: x = d * (q - 8); byte j holds element j in its low nibble and element j+16 in its high nibble.
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQuantBlock / 2];
};
// Q4_1: x = d * q + m, nibbles as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 minimum
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);

// True for the types this project reads and computes with.
bool IsSupportedDType(uint32_t ggml_type);
// ggml's name of any type id it defines ("Q4_K", "IQ2_XXS", ...), nullptr for an id it does not.
const char* GgmlTypeName(uint32_t ggml_type);
// "F32, F16, BF16, Q8_0, Q4_0, Q4_1": the supported types, for error messages.
std::string SupportedDTypeList();
const char* DTypeName(DType type);
// Parses "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1" (case-insensitive). False if unknown.
bool ParseDType(const std::string& name, DType* out);

// Elements per block (1 for float types, 32 for quantised ones) and bytes per block.
int64_t DTypeBlockElems(DType type);
int64_t DTypeBlockBytes(DType type);
bool IsQuantized(DType type);
// Bytes of `n` consecutive elements. REQUIRES: n is a multiple of DTypeBlockElems(type).
int64_t DTypeRowBytes(DType type, int64_t n);

float Fp16ToF32(uint16_t h);
uint16_t F32ToFp16(float f);  // round to nearest even
inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t F32ToBf16(float f);  // round to nearest even

// Reference dequantisation: `n` elements starting at `src` (block-aligned) into `dst` [n].
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);
// Reference quantisation of `n` floats (n a multiple of the block size) into `dst`; same
// rounding as ggml's reference quantisers.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace tpserve
