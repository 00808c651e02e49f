#pragma once

#include <cstdint>

namespace tpserve {

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up. gate, up, out: [n]
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tpserve
