// The FFN's gated activations, one instruction-set level. Element-wise, every step one f32 operation in
// the order written, e^x PortableExpF's bits (exp_lanes.h), so a vector lane gives the portable bits:
// SiluMul:     out[i] = g / (1 + e^(−g)) · up[i]
// GeluTanhMul: u = √(2/π) · (g + 0.044715 · g · g · g), out[i] = g / (1 + e^(−2u)) · up[i]
// ((1 + tanh u) / 2 = 1 / (1 + e^(−2u)): the SiLU form).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/exp_lanes.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

// The exponent's argument of each activation, for one float or four lanes (GCC's vector operators).
struct SiluArgument {
  template <class V>
  V operator()(V g) const {
    return -g;
  }
};
struct GeluTanhArgument {
  template <class V>
  V operator()(V g) const {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const V u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    return -2.0f * u;
  }
};

template <class Argument>
void GatedRows(const float* gate, const float* up, int64_t n, float* out) {
  const Argument argument;
  auto lanes = [&](const float* g_in, const float* up_in, float* out_lanes) {
    ExpLanes g, u;
    std::memcpy(&g, g_in, sizeof g);
    std::memcpy(&u, up_in, sizeof u);
    const ExpLanes o = g / (1.0f + ExpOfLanes(argument(g))) * u;
    std::memcpy(out_lanes, &o, sizeof o);
  };
  int64_t i = 0;
  for (; i + kExpLanes <= n; i += kExpLanes) lanes(gate + i, up + i, out + i);
  if (i < n) {
    float g[kExpLanes] = {}, u[kExpLanes] = {}, o[kExpLanes];
    std::memcpy(g, gate + i, (n - i) * sizeof(float));
    std::memcpy(u, up + i, (n - i) * sizeof(float));
    lanes(g, u, o);
    std::memcpy(out + i, o, (n - i) * sizeof(float));
  }
}

}  // namespace

void SiluMulRows(const float* gate, const float* up, int64_t n, float* out) {
  GatedRows<SiluArgument>(gate, up, n, out);
}

void GeluTanhMulRows(const float* gate, const float* up, int64_t n, float* out) {
  GatedRows<GeluTanhArgument>(gate, up, n, out);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
