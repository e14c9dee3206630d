// --threads: the worker count a run asks for, and the kernel libraries' own thread pools
// (LibTorch's intra-op pool, OpenBLAS's), set by the app and never by a library.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "apps/cli.hpp"
#include "core/dist.hpp"
#include "core/thread_pool.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace icl::cli {

void CheckThreads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw std::invalid_argument("--threads: expected 0 (all cores) or 1.." +
                                std::to_string(kMaxThreads) + ", got " + std::to_string(threads));
}

void SetSerialKernels() {
  torch::set_num_threads(1);
  openblas_set_num_threads(1);
}

void SetSerialBlas() {
  openblas_set_num_threads(1);
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
  const int n = ResolveThreads(threads);
  torch::set_num_threads(n);
  openblas_set_num_threads(n);  // torch's set_num_threads leaves OpenBLAS's own pool alone
}

}  // namespace icl::cli
