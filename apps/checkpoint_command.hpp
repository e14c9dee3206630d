// What the causal-test commands (swap, erase, das) share: one learner in, an HDF5 result and
// its tidy CSV out, both written under temporary names and committed together.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/cli.hpp"
#include "intervene/das.hpp"
#include "learners/checkpoint.hpp"
#include "learners/transformer.hpp"

namespace icl::cli {

// The paths of a run: --checkpoint, --out and --csv ("" = --out with .csv).
struct CheckpointCommand {
  std::string command;  // "swap": for messages
  std::string checkpoint, out, csv;
  std::string out_what;  // "the swaps file": said when --out is missing
  int threads = 0;
  std::vector<std::string> inputs;  // every file read (InputPaths): never replaced
};

// The learner, loaded once.
struct LoadedLearner {
  std::string sha256;
  learners::CheckpointInfo info;
  learners::Transformer model{nullptr};
};

// Checks that --checkpoint and --out are given, takes both outputs (refusing one that exists
// without --force, one that is also an input, and a second writer), loads the learner, sets the
// threads, and calls `work`, which writes the HDF5 result to `h5_path` (a temporary name), the
// CSV into `csv` and a summary to `summary`. The outputs are renamed into place only after it
// returns; then the summary and "wrote OUT and CSV in TIME" are printed.
void RunCheckpointCommand(
    const CheckpointCommand& cmd, const po::variables_map& vm,
    const std::function<void(LoadedLearner& learner, const std::string& h5_path, std::ostream& csv,
                             std::ostream& summary)>& work);

// A constructed checkpoint's quantities (its /construction group), as subspaces of its state
// (after the construction's rotation), one per quantity name; none for a trained learner.
std::vector<intervene::NamedSubspace> ConstructionSubspaces(const std::string& checkpoint,
                                                            int hidden);

}  // namespace icl::cli
