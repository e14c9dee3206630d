// main() of every test program: the process set-up of iclprobe itself (core/process.hpp), so a
// test that compares what it computes in-process with what the program wrote runs the same
// OpenBLAS kernels on both sides (and every child iclprobe inherits the choice).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/process.hpp"

namespace {

// Some known answers (float32 compiled constructions, bit-exact resume fixtures) were derived
// under OpenBLAS's AVX-512 kernels, and a machine's environment may choose others (this
// workplace sets OPENBLAS_CORETYPE=Haswell on AMD Zen 4, where six tests then fail: their
// tolerances follow those kernels' summation order, not the arithmetic; commit 5ef245c).
// On a CPU with AVX-512 the test programs run the SkylakeX kernels whatever the environment
// says, so the suite checks the same arithmetic on every such machine.
void PinTestKernels(char** argv) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const char* now = std::getenv("OPENBLAS_CORETYPE");
  if (!avx512 || (now && std::strcmp(now, "SkylakeX") == 0)) return;
  if (std::getenv("ICLPROBE_TEST_KERNELS_PINNED")) return;  // the exec below failed once
  ::setenv("ICLPROBE_TEST_KERNELS_PINNED", "1", 1);
  ::setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  ::execv("/proc/self/exe", argv);  // OpenBLAS reads the variable when it loads, before main
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  PinTestKernels(argv);
  icl::core::SetUpProcess(argv, /*passive_openmp=*/false);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
