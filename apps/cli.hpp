// Shared pieces of the iclprobe subcommands: option parsing with --help, and the rule that
// bad input ends in one line on stderr and exit code 2. Kept free of LibTorch's headers, which
// only the subcommands that run a model include (through the libraries they call).
#pragma once

#include <armadillo>
#include <array>
#include <boost/program_options.hpp>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "apps/options.hpp"
#include "data/task.hpp"

namespace icl::cli {

namespace po = boost::program_options;

inline constexpr int kExitBadInput = 2;

// Parses argv into `vm`. Returns false when --help was asked for (help is then printed to
// stdout, with `usage` above the options and `example` below them).
bool Parse(int argc, char** argv, po::options_description& options, po::variables_map& vm,
           const std::string& usage, const std::string& example);

// Throws std::invalid_argument("--<name>: must be positive, got <v>") unless value > 0.
template <typename T>
void RequireFinite(const std::string& name, T value) {
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(value))
      throw std::invalid_argument("--" + name + ": must be a finite number, got " +
                                  std::to_string(value));
}
template <typename T>
void RequirePositive(const std::string& name, T value) {
  RequireFinite(name, value);
  if (!(value > 0))
    throw std::invalid_argument("--" + name + ": must be positive, got " + std::to_string(value));
}
template <typename T>
void RequireNonNegative(const std::string& name, T value) {
  RequireFinite(name, value);
  if (!(value >= 0))
    throw std::invalid_argument("--" + name + ": must be non-negative, got " +
                                std::to_string(value));
}

// The one splitter of every comma-list option (`option` as typed: "--k"): core::SplitList, whose
// error on an empty entry ("1,,2", "1,", "") main() prints naming the option. Every parser
// below takes its entries from it.
std::vector<std::string> ListEntries(const std::string& option, const std::string& text);

// "0,4,8" -> {0, 4, 8}; throws naming `option` on an empty, non-integer or repeated entry.
std::vector<int> ParseInts(const std::string& option, const std::string& text);

// Comma-separated items (blanks around them removed); throws naming `option` on an empty or a
// repeated entry.
std::vector<std::string> SplitList(const std::string& option, const std::string& text);
// A comma list of numbers ("0.001,0.01,1"); `option` names it in the message. The library
// checks what they must satisfy.
std::vector<double> ParseNumbers(const std::string& option, const std::string& text);
// The one --threads option of every subcommand that runs in parallel.
void AddThreadsOption(OptionTable& options, int* threads);

// --context-shift and (with `query`) --query-shift: out-of-distribution prompts
// (data/shift.hpp), and --task-family (data/task_family.hpp). Given ones replace the task's;
// task.Validate() checks them against d.
struct ShiftArgs {
  std::string context, query, family;
};
void AddShiftOptions(OptionTable& options, ShiftArgs* shifts, bool query);
void ApplyShifts(const po::variables_map& vm, const ShiftArgs& shifts, data::TaskConfig& task);

// Sets torch's intra-op thread count (0 = all cores; Debian's LibTorch starts with one).
void SetThreads(int threads);
// --threads as a worker count: core::WorkerCount's rule (at most the cores this process may use,
// 0 = all of them; under mpirun, its share of the machine's; at most `work` when > 0), which the
// Python module's threads= follows too. When the request is cut, one line on stderr says to
// what and why.
int ResolveThreads(int threads, long work = 0);
// One intra-op thread for torch and OpenBLAS: for runs that parallelise over independent work
// (probe fits) with their own pool, so kernels' threads never multiply with the workers.
void SetSerialKernels();
// OpenBLAS on one thread, torch's intra-op pool left as SetThreads made it: for runs of many
// small products inside torch ops (the causal tests' forward and backward passes on batches of
// short prompts), where OpenBLAS's own workers mostly yield to each other. Measured on DAS, one
// epoch of the shipped learner on two cores: 85 s with both pools at 2 threads (a third of the
// time in sched_yield), 47 s with one thread for everything.
void SetSerialBlas();
// Throws std::invalid_argument("--threads: ...") unless 0 <= threads <= kMaxThreads.
inline constexpr int kMaxThreads = 256;
void CheckThreads(int threads);

}  // namespace icl::cli
