// --threads: the worker count a run asks for, and the kernel libraries' thread pools the program
// sets from it (learners/kernel_threads.hpp), never a library.
#include <iostream>
#include <string>

#include "apps/cli.hpp"
#include "core/dist.hpp"
#include "core/thread_pool.hpp"
#include "learners/kernel_threads.hpp"

namespace icl::cli {

void CheckThreads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw std::invalid_argument("--threads: expected 0 (all cores) or 1.." +
                                std::to_string(kMaxThreads) + ", got " + std::to_string(threads));
}

void SetSerialKernels() {
  learners::SetKernelThreads(1);
}

void SetSerialBlas() {
  learners::SetBlasThreads(1);
}

int ResolveThreads(int threads, long work) {
  CheckThreads(threads);
  const int n = core::WorkerCount(threads, work);
  if (threads > n && dist::IsRoot()) {
    const int cores = core::WorkerCount(0);  // all cores: under mpirun, this rank's share
    std::cerr << "iclprobe: --threads " << threads << ": running " << n << " worker"
              << (n == 1 ? "" : "s") << " (" << cores << " usable core" << (cores == 1 ? "" : "s")
              << (work > 0 ? ", " + std::to_string(work) + " independent items of work" : "")
              << ")\n";
  }
  return n;
}

void SetThreads(int threads) {
  learners::SetKernelThreads(ResolveThreads(threads));
}

}  // namespace icl::cli
