#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/check.h"
#include "common/logging.h"

namespace tpserve {
namespace {

std::atomic<int> g_active{-1};  // an Isa once chosen
std::mutex g_choose_mu;

#if defined(__x86_64__) && defined(__GNUC__)
// F16C by CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

bool CpuSupportsIsa(Isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c();
    case Isa::kAvx512:
      return CpuSupportsIsa(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
    case Isa::kAvx512Bf16:
      return CpuSupportsIsa(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

bool IsaCompiledIn(Isa isa) {
#if TPSERVE_DISPATCH
  (void)isa;
  return true;
#else
  return isa == Isa::kPortable;
#endif
}

Isa BestIsa() {
  for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
    if (IsaCompiledIn(isa) && CpuSupportsIsa(isa)) return isa;
  }
  return Isa::kPortable;
}

StatusOr<Isa> IsaFromSetting(const char* value) {
  if (value == nullptr || *value == '\0') return BestIsa();
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (std::strcmp(value, IsaName(isa)) != 0) continue;
    if (!IsaCompiledIn(isa)) {
      return InvalidArgument(std::string("TPSERVE_ISA=") + value +
                             ": this build holds only the portable kernels (built with -DTPSERVE_DISPATCH=OFF)");
    }
    if (!CpuSupportsIsa(isa)) {
      return InvalidArgument(std::string("TPSERVE_ISA=") + value + ": this CPU lacks the instructions (best here: " +
                             IsaName(BestIsa()) + ")");
    }
    return isa;
  }
  return InvalidArgument(std::string("TPSERVE_ISA=") + value + ": expected portable, avx2, avx512 or avx512bf16");
}

StatusOr<Isa> InitIsa() {
  std::lock_guard<std::mutex> lock(g_choose_mu);
  const int active = g_active.load();
  if (active >= 0) return static_cast<Isa>(active);
  StatusOr<Isa> isa = IsaFromSetting(std::getenv("TPSERVE_ISA"));
  if (isa.ok()) {
    g_active.store(static_cast<int>(*isa));
    const char* setting = std::getenv("TPSERVE_ISA");
    LOG(INFO) << "CPU kernels: " << IsaName(*isa)
              << (setting != nullptr && *setting != '\0' ? " (TPSERVE_ISA)" : " (the best this CPU and build run)");
  }
  return isa;
}

Isa ActiveIsa() {
  const int active = g_active.load(std::memory_order_relaxed);
  if (active >= 0) return static_cast<Isa>(active);
  StatusOr<Isa> isa = InitIsa();
  if (!isa.ok()) {
    std::fprintf(stderr, "tpserve: %s\n", isa.status().ToString().c_str());
    std::exit(2);
  }
  return *isa;
}

void SetActiveIsaForTesting(Isa isa) {
  CHECK(IsaCompiledIn(isa) && CpuSupportsIsa(isa)) << IsaName(isa);
  g_active.store(static_cast<int>(isa));
}

}  // namespace tpserve
