#include "core/process.hpp"

#include <malloc.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" char* openblas_get_corename(void);

namespace icl::core {

bool IsGenericBlasCore(const std::string& core) {
  static const char* const kGeneric[] = {"Prescott",  "Core2",  "Penryn",     "Dunnington",
                                         "Nehalem",   "Atom",   "Katmai",     "Coppermine",
                                         "Northwood", "Banias", "Sandybridge"};
  for (const char* g : kGeneric)
    if (strcasecmp(core.c_str(), g) == 0) return true;
  return false;
}

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string BlasCoreOverride() {
  if (std::getenv("OPENBLAS_CORETYPE")) return "";  // the user's choice
  const std::string core = BlasCoreName();
  for (const char* avx512 : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (strcasecmp(core.c_str(), avx512) == 0) return "";
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // Any CPU with this AVX-512 set runs the SkylakeX kernels: a generic core's fallback, and the
  // AVX2 kernels 0.3.21 gives AMD Zen 4 (see the header).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (!IsGenericBlasCore(core)) return "";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

void SetUpProcess(char** argv, bool passive_openmp, bool keep_freed_memory) {
  bool changed = false;
  const std::string core = BlasCoreOverride();
  if (!core.empty() && ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0) changed = true;
  if (passive_openmp && !std::getenv("OMP_WAIT_POLICY") &&
      ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0)
    changed = true;
  if (changed) ::execv("/proc/self/exe", argv);  // returns only when it fails: carry on
  if (keep_freed_memory) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts on 64-bit systems
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
  }
}

}  // namespace icl::core
