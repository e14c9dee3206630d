// The shared run of swap, erase and das (checkpoint_command.hpp).
#include "apps/checkpoint_command.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "apps/progress.hpp"
#include "construct/construct.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"

namespace icl::cli {

void RunCheckpointCommand(const CheckpointCommand& cmd, const po::variables_map& vm,
                          const std::function<void(LoadedLearner&, const std::string&,
                                                   std::ostream&, std::ostream&)>& work) {
  if (cmd.checkpoint.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  if (cmd.out.empty()) throw std::invalid_argument("--out: required (" + cmd.out_what + ")");
  CheckThreads(cmd.threads);
  core::RequireRegularInput(cmd.checkpoint, "checkpoint");
  const std::string csv = !cmd.csv.empty()
                              ? cmd.csv
                              : std::filesystem::path(cmd.out).replace_extension(".csv").string();
  std::vector<std::string> inputs = cmd.inputs;
  inputs.push_back(cmd.checkpoint);
  const bool force = vm.count("force") > 0;
  core::RequireDistinctOutputs({{"out", cmd.out}, {"csv", csv}});
  core::AtomicOutput h5out(cmd.out, "out", {force, inputs, false, true});
  core::AtomicOutput csvout(csv, "csv", {force, inputs, false, true});
  LoadedLearner learner;
  // Read, then hashed through the same open file (h5::OpenOnce): the checkpoint is opened once.
  learner.model = learners::LoadCheckpoint(cmd.checkpoint, &learner.info);
  learner.sha256 = core::Sha256File(cmd.checkpoint);
  SetThreads(cmd.threads);
  SetSerialBlas();  // torch's pool parallelises the passes; OpenBLAS's would only yield (cli.hpp)
  const auto t0 = std::chrono::steady_clock::now();
  std::ostringstream csv_text, summary;
  work(learner, h5out.temp_path(), csv_text, summary);
  csvout.WriteText(csv_text.str());
  h5out.Commit();
  csvout.Commit();
  std::cout << summary.str();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {} and {} in {}\n", cmd.out, csv, FormatDuration(secs));
}

std::vector<intervene::NamedSubspace> ConstructionSubspaces(const std::string& checkpoint,
                                                            int hidden) {
  std::vector<intervene::NamedSubspace> out;
  const auto record = construct::ReadConstruction(checkpoint);
  if (!record) return out;
  for (const auto& q : record->quantities) {
    bool seen = false;
    for (const auto& s : out)
      seen = seen || s.name == q.name;
    if (seen || q.rows.size < 1 || q.rows.begin + q.rows.size > hidden) continue;
    const arma::mat axes =
        arma::mat(arma::eye(hidden, hidden)).cols(q.rows.begin, q.rows.begin + q.rows.size - 1);
    out.push_back({q.name, record->rotation.empty() ? axes : arma::mat(record->rotation * axes)});
  }
  return out;
}

}  // namespace icl::cli
