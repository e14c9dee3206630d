// The thread pools of the kernel libraries (LibTorch's intra-op pool, OpenBLAS's own), set in one
// place. A program chooses them for a run (apps/ from --threads, python/ around a call); the
// libraries that do the work never call these.
#pragma once

namespace icl::learners {

// Both pools to `threads` (>= 1): torch's set_num_threads leaves OpenBLAS's pool alone.
void SetKernelThreads(int threads);
// OpenBLAS's pool alone, where torch's pool parallelises the passes and OpenBLAS's threads would
// only contend with it.
void SetBlasThreads(int threads);

// Both pools at one thread while it lives, the previous settings given back after: the rule of
// the stages that spread their work over a pool of their own (extract, probe, train), each piece
// of work on one thread.
class SerialKernels {
 public:
  SerialKernels();
  ~SerialKernels();
  SerialKernels(const SerialKernels&) = delete;
  SerialKernels& operator=(const SerialKernels&) = delete;

 private:
  int torch_, blas_;
};

}  // namespace icl::learners
