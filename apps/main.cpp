// iclprobe: one program, a subcommand per stage (docs/design.md "The data flow").
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "apps/cli.hpp"
#include "apps/cli_reference.hpp"
#include "apps/subcommands.hpp"
#include "core/dist.hpp"
#include "core/errors.hpp"
#include "core/open_once.hpp"
#include "core/process.hpp"
#include "core/version.hpp"

namespace {

void PrintUsage(std::ostream& os) {
  os << "iclprobe " << icl::kVersion << ": mechanistic probing of in-context learners\n\n"
     << "Usage: iclprobe <subcommand> [options]   (iclprobe <subcommand> --help for its "
        "options)\n\n"
     << "Subcommands:\n";
  for (const auto& s : icl::cli::Subcommands())
    os << "  " << s.name << std::string(12 - std::strlen(s.name), ' ') << s.summary << "\n";
}

// One line: newlines inside a message would break "one line on stderr".
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// Some subcommands (Subcommand::torch_pool: train, compare and baselines) run LibTorch kernels on
// LibTorch's OpenMP pool when --threads is not 1. Its workers spin-wait between the many small
// kernels of these models and take the cores OpenBLAS's own threads need (one machine of this
// project's kind: 40 training steps in 20.5 s on 2 threads, 12.3 s with
// OMP_WAIT_POLICY=passive, 14.9 s on one thread). libgomp reads that variable when it is loaded,
// before main, so core::SetUpProcess sets it and re-executes the program (a user's own
// OMP_WAIT_POLICY is respected). extract and probe need none of this: they run one intra-op thread
// per worker.
bool WantsPassiveOpenMp(int argc, char** argv) {
  const icl::cli::Subcommand* s = icl::cli::FindSubcommand(argv[1]);
  if (!s || !s->torch_pool) return false;
  int threads = 0;  // the default: all cores
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[i + 1]);
    if (a.rfind("--threads=", 0) == 0) threads = std::atoi(a.c_str() + 10);
  }
  return !(threads == 1 || (threads <= 0 && std::thread::hardware_concurrency() <= 1));
}

// "extract and probe": the subcommands that share their work among mpirun's ranks.
std::string RankSharingNames() {
  std::vector<std::string> names;
  for (const auto& s : icl::cli::Subcommands())
    if (s.shares_ranks) names.push_back(s.name);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// Ends the process after an error. Several ranks: an error every rank knows of (shared through
// dist::Together, or an option or input check that every rank made alike) ends MPI cleanly;
// any other may leave ranks waiting in a collective call, and the exit status ends the job
// (mpirun stops every rank when one exits with an error).
int ExitAfterError(bool same_on_every_rank) {
  if (icl::dist::Started() && (same_on_every_rank || icl::dist::FailureShared()))
    icl::dist::Finalize();
  return icl::cli::kExitBadInput;
}

}  // namespace

// Any message, one line, with its {name} placeholders written as the options they are: a
// library's std::runtime_error may name settings as InputError does ("pass {resume}").
std::string Rendered(const std::string& what) {
  return OneLine(icl::core::InputError::Render(what, "--"));
}

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails a write with EFBIG, reported like a full disk,
  // instead of killing the process in the middle of a file.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    PrintUsage(std::cerr);
    return icl::cli::kExitBadInput;
  }
  const std::string cmd = argv[1];
  // Not listed in the usage: the reference page docs/cli.md, from the same tables as --help.
  if (cmd == "help" && argc == 3 && std::strcmp(argv[2], "--markdown") == 0) {
    std::cout << icl::cli::CliReferenceMarkdown();
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(std::cout);
    return 0;
  }
  if (cmd == "--version") {
    std::cout << icl::kCreatedBy << "\n";
    return 0;
  }
  // OpenBLAS's fastest kernels for this CPU, OpenMP's passive wait, freed memory kept
  // (data/process.hpp); may re-execute the program once.
  icl::core::SetUpProcess(argv, WantsPassiveOpenMp(argc, argv));
  if (icl::dist::LaunchedInParallel()) {
    // Under mpirun only some subcommands (Subcommand::shares_ranks) spread their work over the
    // ranks; others would repeat the same work P times into the same outputs.
    const icl::cli::Subcommand* s = icl::cli::FindSubcommand(cmd);
    if (!s || !s->shares_ranks) {
      if (icl::dist::LaunchedAsRoot()) {  // one message per job, not one per rank
        std::cerr << "iclprobe " << cmd << ": runs in one process; under mpirun only "
                  << RankSharingNames()
                  << " share their work among the processes (run it without mpirun)\n";
        return icl::cli::kExitBadInput;
      }
      // The other ranks leave quietly: a rank's non-zero exit makes mpirun abort the job, which
      // killed rank 0 before it wrote its message when it started slower (a loaded machine).
      // The job's exit status is rank 0's.
      return 0;
    }
    try {
      icl::dist::Init(&argc, &argv);
    } catch (const std::exception& e) {
      std::cerr << "iclprobe " << cmd << ": " << OneLine(e.what()) << "\n";
      return icl::cli::kExitBadInput;
    }
  }
  // One message per failure: an error found alike by every rank (an option or input check) is
  // printed by rank 0, a failure shared through dist::Together by the lowest rank where it
  // happened, and any other error by the rank that met it, with its number.
  auto speaks = [](bool same_on_every_rank) {
    if (!icl::dist::Started()) return true;
    if (icl::dist::FailureShared()) return icl::dist::Rank() == icl::dist::FirstFailedRank();
    return !same_on_every_rank || icl::dist::IsRoot();
  };
  const std::string rank_note =
      icl::dist::IsRoot() ? "" : " (rank " + std::to_string(icl::dist::Rank()) + ")";
  if (const icl::cli::Subcommand* s = icl::cli::FindSubcommand(cmd)) {
    try {
      int rc = 0;
      {
        // Each input is opened once in the run: its readers share the open file.
        const icl::h5::OpenOnce inputs_opened_once;
        rc = s->run(argc - 1, argv + 1);
      }
      icl::dist::Finalize();
      return rc;
    } catch (const icl::dist::PeerFailed&) {
      return ExitAfterError(true);  // the failing rank printed its error
    } catch (const icl::core::InputError& e) {
      if (!speaks(true)) return ExitAfterError(true);
      // The library names settings; on the command line they are options.
      std::string field = e.field();
      for (char& c : field)
        if (c == '_') c = '-';
      std::cerr << "iclprobe " << cmd << ": "
                << (field.empty() ? e.module() + ": " : "--" + field + ": ")
                << OneLine(icl::core::InputError::Render(e.text(), "--")) << "\n";
      return ExitAfterError(true);
    } catch (const std::bad_alloc&) {
      if (speaks(false))
        std::cerr << "iclprobe " << cmd
                  << ": out of memory: the inputs or options ask for more memory than this "
                     "machine has (fewer prompts, a smaller model or fewer layers?)"
                  << rank_note << "\n";
      return ExitAfterError(false);
    } catch (const boost::program_options::error& e) {
      if (speaks(true))
        std::cerr << "iclprobe " << cmd << ": " << Rendered(e.what()) << " (see iclprobe " << cmd
                  << " --help)\n";
      return ExitAfterError(true);
    } catch (const std::invalid_argument& e) {
      if (speaks(true)) std::cerr << "iclprobe " << cmd << ": " << Rendered(e.what()) << "\n";
      return ExitAfterError(true);
    } catch (const std::exception& e) {
      if (speaks(false))
        std::cerr << "iclprobe " << cmd << ": " << Rendered(e.what()) << rank_note << "\n";
      return ExitAfterError(false);
    }
  }
  std::cerr << "iclprobe: unknown subcommand '" << cmd << "' (see iclprobe --help)\n";
  return icl::cli::kExitBadInput;
}
