// iclprobe: one program, a subcommand per stage (DESIGN.md).
#include <csignal>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "apps/cli.hpp"
#include "data/errors.hpp"
#include "data/version.hpp"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int, char**);
};

const Subcommand kSubcommands[] = {
    {"baselines",
     "per-k error of the classical learners (OLS, ridge, GD, SGD, kNN) on seeded prompts",
     icl::cli::RunBaselines},
    {"train", "train a transformer learner in context and write an HDF5 checkpoint",
     icl::cli::RunTrain},
    {"extract", "stream every layer's hidden states and the regression targets to HDF5",
     icl::cli::RunExtract},
    {"probe", "fit ridge / linear / MLP readouts of regression quantities per layer, with controls",
     icl::cli::RunProbe},
    {"report", "probe tables by layer, decodability onset, plots", icl::cli::RunReport},
    {"compare", "which algorithm does a trained learner match? SPD, ILWD and linearity per k",
     icl::cli::RunCompare},
    {"inspect", "describe a checkpoint; export a copy without its training state",
     icl::cli::RunInspect},
    {"construct", "write a transformer whose weights compute a known algorithm (RAW programs)",
     icl::cli::RunConstruct},
};

void PrintUsage(std::ostream& os) {
  os << "iclprobe " << icl::kVersion << ": mechanistic probing of in-context learners\n\n"
     << "Usage: iclprobe <subcommand> [options]   (iclprobe <subcommand> --help for its "
        "options)\n\n"
     << "Subcommands:\n";
  for (const auto& s : kSubcommands)
    os << "  " << s.name << std::string(12 - std::strlen(s.name), ' ') << s.summary << "\n";
}

// One line: newlines inside a message would break "one line on stderr".
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails a write with EFBIG, reported like a full disk,
  // instead of killing the process in the middle of a file.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    PrintUsage(std::cerr);
    return icl::cli::kExitBadInput;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(std::cout);
    return 0;
  }
  if (cmd == "--version") {
    std::cout << icl::kCreatedBy << "\n";
    return 0;
  }
  for (const auto& s : kSubcommands) {
    if (cmd != s.name) continue;
    try {
      return s.run(argc - 1, argv + 1);
    } catch (const icl::data::InputError& e) {
      // The library names settings; on the command line they are options.
      std::string field = e.field();
      for (char& c : field)
        if (c == '_') c = '-';
      std::cerr << "iclprobe " << cmd << ": "
                << (field.empty() ? e.module() + ": " : "--" + field + ": ")
                << OneLine(icl::data::InputError::Render(e.text(), "--")) << "\n";
    } catch (const std::bad_alloc&) {
      std::cerr << "iclprobe " << cmd
                << ": out of memory: the inputs or options ask for more memory than this machine "
                   "has (fewer prompts, a smaller model or fewer layers?)\n";
    } catch (const boost::program_options::error& e) {
      std::cerr << "iclprobe " << cmd << ": " << OneLine(e.what()) << " (see iclprobe " << cmd
                << " --help)\n";
    } catch (const std::exception& e) {
      std::cerr << "iclprobe " << cmd << ": " << OneLine(e.what()) << "\n";
    }
    return icl::cli::kExitBadInput;
  }
  std::cerr << "iclprobe: unknown subcommand '" << cmd << "' (see iclprobe --help)\n";
  return icl::cli::kExitBadInput;
}
