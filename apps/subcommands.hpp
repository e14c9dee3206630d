// The subcommands of iclprobe, listed once: each one's name, the line `iclprobe --help` shows
// for it, its option table and its run. main() dispatches through this table, prints its help
// from it, and OptionRegistry() collects every option table from it.
#pragma once

#include <string>
#include <vector>

#include "apps/options.hpp"

namespace icl::cli {

struct Subcommand {
  const char* name;
  const char* summary;  // one line of `iclprobe --help`
  std::vector<OptionSpec> (*options)();
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name
  // Under mpirun its work is spread over the ranks; any other subcommand runs in one process
  // and is refused there, as it would only repeat the same work into the same outputs.
  bool shares_ranks = false;
  // It runs LibTorch kernels on its OpenMP pool when --threads is not 1, which then waits
  // passively (main.cpp, WantsPassiveOpenMp).
  bool torch_pool = false;
};

// Every subcommand, in the order of `iclprobe --help`.
const std::vector<Subcommand>& Subcommands();
// The subcommand called `name`, or nullptr.
const Subcommand* FindSubcommand(const std::string& name);

// Each subcommand's option table and run, defined in apps/<subcommand>.cpp.
std::vector<OptionSpec> BaselinesOptions();
std::vector<OptionSpec> TrainOptions();
std::vector<OptionSpec> InspectOptions();
std::vector<OptionSpec> ExtractOptions();
std::vector<OptionSpec> ProbeOptions();
std::vector<OptionSpec> CompareOptions();
std::vector<OptionSpec> ReportOptions();
std::vector<OptionSpec> ConstructOptions();
std::vector<OptionSpec> ImportOptions();
std::vector<OptionSpec> InterveneOptions();
std::vector<OptionSpec> TraceOptions();
std::vector<OptionSpec> SwapOptions();
std::vector<OptionSpec> EraseOptions();
std::vector<OptionSpec> DasOptions();

int RunBaselines(int argc, char** argv);
int RunTrain(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunExtract(int argc, char** argv);
int RunProbe(int argc, char** argv);
int RunCompare(int argc, char** argv);
int RunReport(int argc, char** argv);
int RunConstruct(int argc, char** argv);
int RunImport(int argc, char** argv);
int RunIntervene(int argc, char** argv);
int RunTrace(int argc, char** argv);
int RunSwap(int argc, char** argv);
int RunErase(int argc, char** argv);
int RunDas(int argc, char** argv);

}  // namespace icl::cli
