// Settings of the whole process that only take effect when made at its start: which kernels
// OpenBLAS runs, how OpenMP's workers wait, and how freed memory is kept. A program calls
// SetUpProcess first thing in main (iclprobe, the bench and test programs). Thread counts are
// not set here: only programs set those (tests/check_layering.sh).
#pragma once

#include <string>

namespace icl::core {

// The OpenBLAS core type this CPU should run, when OpenBLAS chose a slower one itself; "" when
// its own choice is right or the user set OPENBLAS_CORETYPE. OpenBLAS 0.3.21 (Debian 12) does
// not know recent Xeons (Sapphire / Emerald Rapids) and falls back to its generic SSE3 kernels
// ("Prescott"), a quarter of the speed of its AVX-512 ones there (float32 1024^3 products: 30
// against 95-136 GFLOP/s on one thread, bench_train). Then this names "SkylakeX" (AVX-512 F,
// CD, BW, DQ, VL present) or "Haswell" (AVX2 and FMA); on other architectures, "". It also runs
// AMD Zen 4 (AVX-512, which 0.3.21 maps to its AVX2 "Haswell" kernels) on the AVX-512 ones: the
// same speed there (bench_train: 67-72 GFLOP/s either way), and the same float32 summation order
// as on the Intel AVX-512 machines, which the tests' known answers and bit-exact resume fixtures
// were made on (with the Haswell kernels six of them failed on Zen 4: tolerances that follow the
// kernels' rounding, not the arithmetic; commit 5ef245c).
std::string BlasCoreOverride();

// True for OpenBLAS's generic x86-64 cores (Prescott, Core2, ..., Sandybridge: no AVX2), the
// ones it falls back to for a CPU it does not recognise.
bool IsGenericBlasCore(const std::string& core);

// The core OpenBLAS runs in this process ("SkylakeX", "Prescott", ...).
std::string BlasCoreName();

// Re-executes the program once (execv of /proc/self/exe, same arguments) with
// OPENBLAS_CORETYPE = BlasCoreOverride() when that is not "", and with
// OMP_WAIT_POLICY=PASSIVE when `passive_openmp` and the user has not set it: both are read
// when the libraries load, before main. Returns (without re-executing) when nothing needs
// changing or the exec fails; the second run finds both set and goes on. Call it before any
// thread or MPI starts.
//
// Then, unless `keep_freed_memory` is false, keeps freed memory in the process. LibTorch
// allocates and frees each step's activations and gradients (hundreds of blocks of 0.1-10 MiB);
// by default glibc serves such blocks with mmap, or hands the free top of a heap back to the
// kernel, so every training step faults its memory in again page by page (~11,000 faults per
// step of the shipped config), and that kernel work does not overlap between threads: training
// on 2 workers gained only 1.33x over one (bench_shards). Blocks below 32 MiB then come from
// the heap, and a heap is trimmed only when 512 MiB of it are free: ~90% fewer faults, 1.68x.
// The resident size stays at its peak between steps instead of shrinking; the peak itself is
// unchanged.
void SetUpProcess(char** argv, bool passive_openmp, bool keep_freed_memory = true);

}  // namespace icl::core
