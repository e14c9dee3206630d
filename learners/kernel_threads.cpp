// The kernel libraries' thread pools (learners/kernel_threads.hpp).
#include "learners/kernel_threads.hpp"

#include <torch/torch.h>

extern "C" int openblas_get_num_threads(void);
extern "C" void openblas_set_num_threads(int num_threads);

namespace icl::learners {

void SetKernelThreads(int threads) {
  torch::set_num_threads(threads);
  openblas_set_num_threads(threads);
}

void SetBlasThreads(int threads) {
  openblas_set_num_threads(threads);
}

SerialKernels::SerialKernels()
    : torch_(torch::get_num_threads()), blas_(openblas_get_num_threads()) {
  SetKernelThreads(1);
}

SerialKernels::~SerialKernels() {
  torch::set_num_threads(torch_);
  openblas_set_num_threads(blas_);
}

}  // namespace icl::learners
