// The instruction-set level the CPU kernels run at, chosen once per process.
// Every level computes bitwise the same results (each kernel has one canonical operation order,
// written next to it in kernels/cpu/simd/); the levels differ only in speed. The SIMD kernels are
// compiled once per level (kernels/CMakeLists.txt) and the fastest level the CPU supports runs,
// unless TPSERVE_ISA=portable|avx2|avx512|avx512bf16 names another.
#pragma once

#include "common/status.h"

namespace tpserve {

enum class Isa {
  kPortable,  // baseline x86-64 (or any CPU): scalar code, the canonical order written out
  kAvx2,      // x86-64-v3: AVX2, FMA, F16C
  kAvx512,    // x86-64-v4 (AVX-512 F/BW/DQ/VL) and AVX-512 VNNI
  kAvx512Bf16,  // kAvx512 and AVX512-BF16: BF16 weights' panels through its dot product (VDPBF16PS)
};

const char* IsaName(Isa isa);
bool CpuSupportsIsa(Isa isa);  // the CPU (and OS) can run this level's instructions
bool IsaCompiledIn(Isa isa);   // this build holds the level (-DTPSERVE_DISPATCH=OFF: portable only)
Isa BestIsa();                 // the fastest level that is both compiled in and supported

// The level named by `value` (portable|avx2|avx512|avx512bf16), or, for null or empty, BestIsa().
// InvalidArgument for an unknown name or a level this CPU or build cannot run.
StatusOr<Isa> IsaFromSetting(const char* value);

// Chooses the level from TPSERVE_ISA once and logs it; later calls return the same answer. Mains
// call it at startup so that a bad setting is reported as an error.
StatusOr<Isa> InitIsa();

// The level in use. The first call chooses it as InitIsa does; a bad TPSERVE_ISA then ends the
// process with the error (a process that never called InitIsa has no other way to report it).
Isa ActiveIsa();

// Tests: run the kernels at `isa` from now on. REQUIRES: CpuSupportsIsa(isa) && IsaCompiledIn(isa).
void SetActiveIsaForTesting(Isa isa);

}  // namespace tpserve
