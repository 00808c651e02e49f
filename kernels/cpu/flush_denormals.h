// Flushing of denormal floats for the duration of a scope, on the calling thread: inputs read as zero
// (DAZ) and results that would be denormal written as zero of their sign (FTZ). BF16 weights' matmuls run
// under it at every level, because AVX512-BF16's dot product (VDPBF16PS) computes that way whatever MXCSR
// says: two f32 fmas per lane, DAZ in, FTZ out. The same fmas under this scope give its bits on every CPU
// (README "Decisions", BF16 activations).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace tpserve {

class FlushDenormalsScope {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFlushBits = 0x8040;  // MXCSR's FTZ (bit 15) and DAZ (bit 6)
  FlushDenormalsScope() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushBits); }
  ~FlushDenormalsScope() { _mm_setcsr(saved_); }
#else
  FlushDenormalsScope() = default;  // no x86 SIMD level exists to match here
#endif
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved_;
#endif
};

}  // namespace tpserve
