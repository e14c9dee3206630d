// Process set-up (data/process.hpp): iclprobe runs the OpenBLAS kernels of the CPU it is on, and
// a user's own OPENBLAS_CORETYPE is kept.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "core/process.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

// The cores OpenBLAS names in "Core: X" lines (OPENBLAS_VERBOSE=2 prints one when it loads).
std::vector<std::string> CoresLoaded(const std::string& err) {
  std::vector<std::string> cores;
  const std::regex line("Core: ([A-Za-z0-9]+)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator();
       ++it)
    cores.push_back((*it)[1]);
  return cores;
}

}  // namespace

TEST(Process, AUsersOpenblasCoretypeIsKept) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");  // this test program's own choice
  const std::string saved = before ? before : "";
  ASSERT_EQ(::setenv("OPENBLAS_CORETYPE", "Prescott", 1), 0);
  EXPECT_EQ(core::BlasCoreOverride(), "");
  if (before) {
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    ::unsetenv("OPENBLAS_CORETYPE");
  }
  // The program loads OpenBLAS once, with the user's core, and is not re-executed.
  const auto r = test::RunShell("OPENBLAS_CORETYPE=Prescott OPENBLAS_VERBOSE=2 '" +
                                test::IclprobeBin() + "' inspect --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CoresLoaded(r.err), std::vector<std::string>{"Prescott"}) << r.err;
}

TEST(Process, IclprobeRunsTheKernelsOfItsCpu) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    GTEST_SKIP() << "this CPU has no AVX2/FMA: OpenBLAS's generic kernels are its own";
#else
  GTEST_SKIP() << "OpenBLAS's cores are only chosen here on x86";
#endif
  const auto r = test::RunShell("env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 '" +
                                test::IclprobeBin() + "' inspect --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cores = CoresLoaded(r.err);
  ASSERT_FALSE(cores.empty()) << "OPENBLAS_VERBOSE=2 printed no core: " << r.err;
  // The core the program ran on (the last one loaded: after a re-execution, the second).
  EXPECT_FALSE(core::IsGenericBlasCore(cores.back())) << r.err;
  // At most one re-execution: away from a generic core, or, on a CPU with AVX-512 (F, CD, BW,
  // DQ, VL), away from the AVX2 kernels OpenBLAS 0.3.21 picks for AMD Zen 4.
  ASSERT_LE(cores.size(), 2u) << r.err;
#if defined(__x86_64__) || defined(__i386__)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (avx512) {
    const std::string& ran = cores.back();
    EXPECT_TRUE(ran == "SkylakeX" || ran == "Cooperlake" || ran == "SapphireRapids") << r.err;
  }
  if (cores.size() == 2 && !avx512) {
    EXPECT_TRUE(core::IsGenericBlasCore(cores.front())) << r.err;
  }
#endif
}
