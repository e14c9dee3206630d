// Option parsing shared by the subcommands.
#include "apps/cli.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/dist.hpp"
#include "core/spec.hpp"

namespace icl::cli {

bool Parse(int argc, char** argv, po::options_description& options, po::variables_map& vm,
           const std::string& usage, const std::string& example) {
  options.add_options()("help,h", "show this help and exit");
  // No positional arguments: a stray word (a forgotten option name) is an error, not ignored.
  po::positional_options_description none;
  po::store(po::command_line_parser(argc, argv).options(options).positional(none).run(), vm);
  if (vm.count("help")) {
    if (dist::IsRoot())  // once under mpirun
      std::cout << usage << "\n\n" << options << "\nExample:\n  " << example << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

namespace {

// A list item given twice would write its rows twice (or compare a thing with itself).
template <typename T>
void RequireNoDuplicates(const std::string& option, const std::vector<T>& items) {
  for (std::size_t i = 0; i < items.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (items[i] == items[j]) {
        std::ostringstream os;
        os << items[i];
        throw std::invalid_argument(option + ": '" + os.str() + "' is listed twice");
      }
}

}  // namespace

std::vector<std::string> ListEntries(const std::string& option, const std::string& text) {
  // The setting the option fills, as core::InputError names it; main() renders it back as the
  // option ("k" -> "--k", "codelength_blocks" -> "--codelength-blocks").
  std::string field = option.rfind("--", 0) == 0 ? option.substr(2) : option;
  for (char& c : field)
    if (c == '-') c = '_';
  return core::SplitList("iclprobe", field, text);
}

std::vector<int> ParseInts(const std::string& option, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : ListEntries(option, text)) {
    const auto v =
        core::ParseInteger(item, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    if (!v)
      throw std::invalid_argument(option + ": expected comma-separated integers like 0,4,8, got '" +
                                  text.substr(0, 200) + "'");
    out.push_back(static_cast<int>(*v));
  }
  RequireNoDuplicates(option, out);
  return out;
}

std::vector<std::string> SplitList(const std::string& option, const std::string& text) {
  std::vector<std::string> out = ListEntries(option, text);
  RequireNoDuplicates(option, out);
  return out;
}

std::vector<double> ParseNumbers(const std::string& option, const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : ListEntries(option, text)) {
    const auto v = core::ParseNumber(item);
    if (!v || !std::isfinite(*v))
      throw std::invalid_argument(option +
                                  ": expected a comma list of numbers like 0.01,0.1,1, "
                                  "got '" +
                                  text.substr(0, 200) + "'");
    out.push_back(*v);
  }
  if (out.size() > 1000) throw std::invalid_argument(option + ": more than 1000 values");
  return out;
}

void AddThreadsOption(OptionTable& options, int* threads) {
  options.Value("threads", threads, "threads",
                "worker threads (0 = all cores; under mpirun, the cores of the machine shared "
                "among its ranks)");
}

void AddShiftOptions(OptionTable& options, ShiftArgs* shifts, bool query) {
  options.Optional("context-shift", &shifts->context, "context_shift",
                   "shift the context examples (default: none, the training distribution): "
                   "skewed (x ~ N(0, S), eigenvalues of S proportional to 1/(i+1), trace d), "
                   "scale:S (x times S), half-subspace[:M] (x in a fixed M-dimensional "
                   "subspace, default d/2), orthant[:+|-] (every x_i of one sign), y-scale:S "
                   "(labels times S); recorded in the task configuration");
  options.Optional("task-family", &shifts->family, "task_family",
                   "draw the prompts' tasks from another family than the checkpoint's (default: "
                   "its own): gaussian (w ~ N(0, tau^2 I)), pool:M[:SEED] (M weight vectors "
                   "drawn once from SEED, default 1), noise-mix:S1,S2,...[:P1,P2,...] (the "
                   "prompt's noise sigma drawn from the list), sparse:S (S non-zero coordinates); "
                   "recorded in the task configuration");
  if (query)
    options.Optional("query-shift", &shifts->query, "query_shift",
                     "draw the query predicted after k examples apart from the context "
                     "(default: same, the next example): none (N(0, I)), skewed, scale:S, "
                     "half-subspace[:M], orthant[:+|-], or orthogonal (orthogonal to the k "
                     "examples' span; where they span R^d, drawn like an example)");
}

void ApplyShifts(const po::variables_map& vm, const ShiftArgs& shifts, data::TaskConfig& task) {
  if (vm.count("context-shift"))
    task.context_shift = data::ParseShift(shifts.context, "context_shift");
  if (vm.count("query-shift")) task.query_shift = data::ParseShift(shifts.query, "query_shift");
  if (vm.count("task-family")) {
    task.family = data::ParseTaskFamily(shifts.family);
    // A noise mixture's levels are its own: the checkpoint's noise gives way unless --noise is
    // given, which the task's Validate then refuses with its reason.
    const bool noise_given = vm.count("noise") && !vm["noise"].defaulted();
    if (task.family.kind == data::TaskFamily::Kind::kNoiseMix && !noise_given) task.noise = 0;
  }
}

}  // namespace icl::cli
