// Shared pieces of the iclprobe subcommands: option parsing with --help, and the rule that
// bad input ends in one line on stderr and exit code 2.
#pragma once

#include <boost/program_options.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace icl::cli {

namespace po = boost::program_options;

inline constexpr int kExitBadInput = 2;

// Parses argv into `vm`. Returns false when --help was asked for (help is then printed to
// stdout, with `usage` above the options and `example` below them).
bool Parse(int argc, char** argv, po::options_description& options, po::variables_map& vm,
           const std::string& usage, const std::string& example);

// Throws std::invalid_argument("--<name>: must be positive, got <v>") unless value > 0.
template <typename T>
void RequirePositive(const std::string& name, T value) {
  if (!(value > 0))
    throw std::invalid_argument("--" + name + ": must be positive, got " + std::to_string(value));
}
template <typename T>
void RequireNonNegative(const std::string& name, T value) {
  if (!(value >= 0))
    throw std::invalid_argument("--" + name + ": must be non-negative, got " +
                                std::to_string(value));
}

// "0,4,8" -> {0, 4, 8}; throws std::invalid_argument naming `option` on an empty or
// non-integer entry.
std::vector<int> ParseInts(const std::string& option, const std::string& text);

// Sets torch's intra-op thread count (0 = all cores; Debian's LibTorch starts with one).
void SetThreads(int threads);
// Throws std::invalid_argument("--threads: ...") unless 0 <= threads <= kMaxThreads.
inline constexpr int kMaxThreads = 256;
void CheckThreads(int threads);

// Subcommands.
int RunBaselines(int argc, char** argv);
int RunTrain(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunExtract(int argc, char** argv);
int RunProbe(int argc, char** argv);
int RunCompare(int argc, char** argv);
int RunReport(int argc, char** argv);

}  // namespace icl::cli
