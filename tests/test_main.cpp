// main() of every test program: the process set-up of iclprobe itself (data/process.hpp), so a
// test that compares what it computes in-process with what the program wrote runs the same
// OpenBLAS kernels on both sides (and every child iclprobe inherits the choice).
#include <gtest/gtest.h>

#include "core/process.hpp"

int main(int argc, char** argv) {
  icl::core::SetUpProcess(argv, /*passive_openmp=*/false);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
