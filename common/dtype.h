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
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Every quantised type is read in blocks of 32 values (kernels/cpu: one activation block each);
// the K-quants store them in super-blocks of 256 that share their header (scales, minimums), so a
// K-quant row can only be sliced at multiples of 256.
constexpr int kQuantBlock = 32;
constexpr int kSuperBlock = 256;  // ggml's QK_K

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
// Q5_0: x = d * (q - 16), q = nibble | (bit j of qh) << 4 for element j (nibbles as in Q4_0).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // little-endian u32, bit j: the fifth bit of element j
  uint8_t qs[kQuantBlock / 2];
};
// Q5_1: x = d * q + m, q as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQuantBlock / 2];
};
// The K-quants (ggml's layouts, 256 values per super-block). Element order and scale packing are
// decoded in one place, common/quant_block.cc (DecodeQuantBlock).
// Q2_K: 16 groups of 16, x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in 0..3.
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: 16 groups of 16, x = d * (s[g] - 32) * (q - 4·!hbit), 6-bit s packed in 12 bytes, q 2 bits + hmask.
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};
// Q4_K: 8 groups of 32, x = d * sc[g] * q - dmin * m[g], 6-bit sc and m packed in 12 bytes, q 0..15.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kSuperBlock / 2];
};
// Q5_K: as Q4_K with a fifth bit per value in qh, q 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
// Q6_K: 16 groups of 16, x = d * scales[g] * (q - 32), q = 4 low bits in ql and 2 high bits in qh.
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// True for the types this project reads and computes with.
bool IsSupportedDType(uint32_t ggml_type);
// ggml's name of any type id it defines ("Q4_K", "IQ2_XXS", ...), nullptr for an id it does not.
const char* GgmlTypeName(uint32_t ggml_type);
// Every type this project reads, float types first.
inline constexpr DType kSupportedDTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                             DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                             DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                             DType::kQ6_K};
// "F32, F16, BF16, Q8_0, Q4_0, ...": the supported types, for error messages.
std::string SupportedDTypeList();
const char* DTypeName(DType type);
// Parses a supported type's name ("f32", "q4_0", "Q4_K", ...; case-insensitive). False if unknown.
bool ParseDType(const std::string& name, DType* out);

// Elements per block (1 for float types, 32 for Q4_0..Q8_0, 256 for K-quants) and bytes per
// block: a row can be sliced only at multiples of DTypeBlockElems.
int64_t DTypeBlockElems(DType type);
int64_t DTypeBlockBytes(DType type);
bool IsQuantized(DType type);
bool IsKQuant(DType type);  // Q2_K..Q6_K
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
// Round to nearest even; a NaN stays a NaN, made quiet. Inline and branch-free, so that a loop of it vectorises
// (MatMul rounds BF16 weights' activations with it: kernels/cpu/matmul.cc).
inline uint16_t F32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x40;
  return static_cast<uint16_t>((x & 0x7fffffff) > 0x7f800000 ? quiet_nan : rounded);
}

// Reference dequantisation: `n` elements starting at `src` (block-aligned) into `dst` [n].
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);
// Reference quantisation of `n` floats (n a multiple of the block size) into `dst`; same
// rounding as ggml's reference quantisers.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace tpserve
