#include "kernels/cpu/rope.h"

#include <vector>

#include "common/check.h"
#include "kernels/cpu/portable_math.h"

namespace tpserve {

void RopeAngles(const int32_t* positions, int64_t num_tokens, const float* inv_freq, int64_t half, float* cos_t,
                float* sin_t) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    // Angles in f64: positions in the thousands times f32 frequencies lose radians in f32.
    // PortableSinCos, not libm: the same bits on every CPU (kernels/cpu/portable_math.h).
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
      double s = 0.0, c = 0.0;
      PortableSinCos(angle, &s, &c);
      cos_t[t * half + i] = static_cast<float>(c);
      sin_t[t * half + i] = static_cast<float>(s);
    }
  }
}

void RotateHeads(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, const float* cos_t,
                 const float* sin_t, RopeLayout layout) {
  CHECK_EQ(head_dim % 2, 0);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* c = cos_t + t * half;
    const float* s = sin_t + t * half;
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
        const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

void ApplyRope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
               const float* inv_freq, RopeLayout layout) {
  CHECK_EQ(head_dim % 2, 0);
  const int64_t half = head_dim / 2;
  std::vector<float> cos_t(num_tokens * half), sin_t(num_tokens * half);
  RopeAngles(positions, num_tokens, inv_freq, half, cos_t.data(), sin_t.data());
  RotateHeads(x, num_tokens, num_heads, head_dim, cos_t.data(), sin_t.data(), layout);
}

}  // namespace tpserve
