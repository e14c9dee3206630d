// iclprobe baselines: the per-k error curves of the classical learners on seeded prompts.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/learner_errors.hpp"
#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "core/output.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct BaselinesArgs {
  BaselinesArgs() {
    task.d = 8;
    task.n = 40;
  }
  data::TaskConfig task;
  int prompts = 2000;
  std::uint64_t seed = 1;
  std::string learner_specs = "ols,ridge:0.1,gd:0.01,sgd:0.03,knn:3";
  std::string csv;
  std::vector<std::string> checkpoints;
  int threads = 0;
  bool fixed_w = false;
  ShiftArgs shifts;
};

void DeclareBaselinesOptions(OptionTable& t, BaselinesArgs& a) {
  // clang-format off
  t.Value("d", &a.task.d, "task.d", "input dimension d");
  t.Value("n", &a.task.n, "task.n", "examples per prompt n");
  t.Value("noise", &a.task.noise, "task.noise", "label noise sigma");
  t.Value("w-scale", &a.task.w_scale, "task.w_scale", "weight scale tau: w ~ N(0, tau^2 I)");
  t.Implicit("fixed-w", &a.fixed_w, true, "fixed_w", "control task: w = all ones for every prompt "
       "(--fixed-w alone means true; default: the checkpoint's, else false)");
  t.Value("prompts,N", &a.prompts, "prompts", "number of prompts");
  t.Value("seed", &a.seed, "seed", "prompt-set seed");
  t.Value("learners", &a.learner_specs, "learner_specs", "comma-separated learner specs: ols, ridge:LAMBDA, bayes (ridge with sigma^2/tau^2), "
       "gd:ALPHA[:STEPS], sgd:ALPHA, newton:STEPS (Fu et al.: from 2 S / ||S S^T||_F), newton:STEPS:C[:LAMBDA] (Newton-Schulz from C I), knn:K[:weighted], zero");
  t.List("checkpoint,c", &a.checkpoints, "checkpoints", "also evaluate this trained learner on the same prompts (repeatable); d, n and the task "
       "default to the checkpoint's training task");
  t.Optional("csv", &a.csv, "csv", "also write the table as tidy CSV (learner,k,error,error_lo,error_hi)");
  t.Switch("force", "overwrite an existing --csv file");
  // clang-format on
  AddShiftOptions(t, &a.shifts, /*query=*/true);
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Output("csv");
}

}  // namespace

std::vector<OptionSpec> BaselinesOptions() {
  return SpecsOf("baselines", &DeclareBaselinesOptions);
}

int RunBaselines(int argc, char** argv) {
  BaselinesArgs a;
  auto& task = a.task;
  auto& prompts = a.prompts;
  auto& seed = a.seed;
  auto& learner_specs = a.learner_specs;
  auto& csv = a.csv;
  auto& checkpoints = a.checkpoints;
  auto& threads = a.threads;
  auto& fixed_w = a.fixed_w;
  OptionTable t("baselines");
  DeclareBaselinesOptions(t, a);
  po::options_description& opts = t.description();
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
          "Usage: iclprobe baselines [options]\n\n"
          "Prints, per number of examples k, each classical learner's mean squared error of\n"
          "predicting y_{k+1} from the first k examples, divided by d (95% intervals in the CSV).",
          "iclprobe baselines --d 8 --n 40 --noise 0 --prompts 2000 --seed 1 "
          "--learners ols,ridge:0.1,gd:0.01,sgd:0.03,knn:3 --csv baselines.csv"))
    return 0;

  // A checkpoint supplies the task unless an option overrides it.
  std::vector<learners::CheckpointInfo> infos;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    core::RequireRegularInput(checkpoints[i], "checkpoint");
    // The same file twice (by path or through a link) would print and write its rows twice.
    for (std::size_t j = 0; j < i; ++j)
      if (core::IdOf(checkpoints[i]) == core::IdOf(checkpoints[j]))
        throw std::invalid_argument("--checkpoint: '" + checkpoints[i] + "' is given twice");
    infos.push_back(learners::ReadCheckpointInfo(checkpoints[i]));
  }
  if (!infos.empty()) {
    const data::TaskConfig& trained = infos[0].train.task;
    if (vm["d"].defaulted()) task.d = trained.d;
    if (vm["n"].defaulted()) task.n = trained.n;
    if (vm["noise"].defaulted()) task.noise = trained.noise;
    if (vm["w-scale"].defaulted()) task.w_scale = trained.w_scale;
    task.fixed_w = trained.fixed_w;
    task.family = trained.family;
    if (task.d == trained.d) task.d_effective = trained.d_effective;
    for (const auto& info : infos)
      learners::CheckReadsTask(info, task);
  }

  if (vm.count("fixed-w")) task.fixed_w = fixed_w;
  ApplyShifts(vm, a.shifts, task);
  // Everything is checked before any work or output starts.
  RequirePositive("prompts", prompts);
  task.Validate();  // names the setting at fault (--d, --n, --noise, --w-scale, --*-shift)
  const auto learners = learners::MakeLearners(learner_specs, task);
  CheckThreads(threads);
  std::unique_ptr<core::AtomicOutput> out;
  if (vm.count("csv"))
    out = std::make_unique<core::AtomicOutput>(
        csv, "csv",
        core::OutputOptions{vm.count("force") > 0, InputPaths(t.specs(), vm), false, true});

  const data::PromptSet set = data::SamplePrompts(task, seed, 0, prompts);
  std::vector<analysis::ErrorCurve> curves;
  if (!infos.empty()) SetThreads(threads);
  for (const auto& info : infos) {
    learners::Transformer model = learners::LoadCheckpoint(info.path);
    curves.push_back(analysis::Summarize(std::filesystem::path(info.path).stem().string(),
                                         learners::TransformerErrors(model, set)));
  }
  for (auto& c : analysis::EvaluateLearners(set, learners))
    curves.push_back(std::move(c));

  std::cout << "baselines: d=" << task.d << " n=" << task.n << " noise=" << task.noise
            << " w_scale=" << task.w_scale << (task.fixed_w ? " fixed_w" : "")
            << (task.context_shift.IsIdentity() ? ""
                                                : " context_shift=" + task.context_shift.Spec())
            << (task.HasQueries() ? " query_shift=" + task.query_shift.Spec() : "")
            << " prompts=" << prompts << " seed=" << seed << "\n";
  analysis::PrintErrorTable(std::cout, curves);

  if (out) {
    std::ostringstream f;
    analysis::WriteErrorCsv(f, curves);
    out->CommitText(f.str());
    std::cout << "wrote " << csv << "\n";
  }
  return 0;
}

}  // namespace icl::cli
