// iclprobe compare: which learning algorithm does a trained transformer match? SPD and ILWD per
// k against classical learners, the implicit-fit R2 (how linear it is), and the matrix of the
// paper's noisy-regime table when several checkpoints are given.
#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/compare_run.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "core/output.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct CompareArgs {
  std::vector<std::string> checkpoints;
  std::string csv;
  int threads = 0, n = 0;
  double noise = -1, w_scale = -1;
  analysis::CompareRequest req;
};

void DeclareOptions(OptionTable& t, CompareArgs& a) {
  // clang-format off
  t.List("checkpoint,c", &a.checkpoints, "checkpoints", "trained learner (repeatable: several give the "
       "matrix learners x checkpoints of mean SPD)");
  t.Value("learners", &a.req.learner_specs, "learner_specs", "reference learners: ols, "
       "ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], sgd:ALPHA, newton:STEPS (Fu et al.), newton:STEPS:C[:LAMBDA], knn:K[:weighted], zero; and gd:fit, "
       "gd:fit:STEPS, sgd:fit, ridge:fit: the family's member closest to each checkpoint, its step "
       "size or lambda fitted on --fit-prompts prompts disjoint from the scored ones");
  t.Value("fit-prompts", &a.req.fit_prompts, "fit_prompts", "prompts (after the "
       "scored ones in the seeded stream) on which the :fit learners are fitted");
  t.Value("prompts,N", &a.req.prompts, "prompts", "prompts for SPD");
  t.Value("seed", &a.req.seed, "seed", "prompt-set (and query) seed");
  t.Value("queries", &a.req.queries, "queries", "query points per context for the implicit "
       "weights (0 = 2(d+1); at least d+1)");
  t.Value("ilwd-prompts", &a.req.ilwd_prompts, "ilwd_prompts", "contexts (the first prompts) "
       "used for ILWD and the implicit-fit R2");
  t.Optional("n", &a.n, "n", "examples per prompt (default: the first checkpoint's training n)");
  t.Optional("noise", &a.noise, "noise", "label noise sigma (default: the first checkpoint's)");
  t.Optional("w-scale", &a.w_scale, "w_scale", "weight scale tau (default: the first checkpoint's)");
  t.Switch("all-pairs", "also compare every pair of reference learners");
  t.Optional("csv", &a.csv, "csv", "tidy CSV: model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted; the implicit-fit R2 goes "
       "to <csv stem>.linearity.csv (model,k,r2,contexts), the paired table (each learner's "
       "difference from the diagonal ridge, column minima and their significance) to "
       "<csv stem>.paired.csv");
  t.Switch("force", "overwrite existing CSV files");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
}

// Each checkpoint once, read; its name in the tables: its file stem, or its path where stems
// collide.
std::vector<learners::CheckpointInfo> ReadCheckpoints(const std::vector<std::string>& checkpoints,
                                                      std::vector<std::string>& names) {
  std::vector<learners::CheckpointInfo> infos;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    core::RequireRegularInput(checkpoints[i], "checkpoint");
    for (std::size_t j = 0; j < i; ++j)
      if (core::IdOf(checkpoints[i]) == core::IdOf(checkpoints[j]))
        throw std::invalid_argument("--checkpoint: '" + checkpoints[i] + "' is given twice");
    infos.push_back(learners::ReadCheckpointInfo(checkpoints[i]));
  }
  for (const auto& c : checkpoints) {
    const std::string stem = std::filesystem::path(c).stem().string();
    int same = 0;
    for (const auto& o : checkpoints)
      same += std::filesystem::path(o).stem().string() == stem;
    names.push_back(same > 1 ? c : stem);
  }
  return infos;
}

// The CSV and the two files beside it, all written or none.
struct CompareOutputs {
  std::unique_ptr<core::AtomicOutput> spd, linearity, paired;

  CompareOutputs(const std::string& csv, const std::vector<std::string>& inputs, bool force) {
    std::filesystem::path lp(csv);
    lp.replace_extension("");
    const std::string lin = lp.string() + ".linearity.csv";
    const std::string pair = lp.string() + ".paired.csv";
    core::RequireDistinctOutputs({{"csv", csv}, {"csv", lin}, {"csv", pair}});
    const core::OutputOptions o{force, inputs, false, true};
    spd = std::make_unique<core::AtomicOutput>(csv, "csv", o);
    linearity = std::make_unique<core::AtomicOutput>(lin, "csv", o);
    paired = std::make_unique<core::AtomicOutput>(pair, "csv", o);
  }

  void Write(const analysis::CompareResult& result) {
    std::ostringstream f, g, h;
    analysis::WriteCompareCsv(f, result);
    analysis::WriteLinearityCsv(g, result);
    analysis::WritePairedCsv(h, analysis::MakePairedTable(result));
    spd->WriteText(f.str());
    linearity->WriteText(g.str());
    paired->WriteText(h.str());
    // All complete and synced before any takes its final name.
    spd->Commit();
    linearity->Commit();
    paired->Commit();
    std::cout << "wrote " << spd->path() << ", " << linearity->path() << " and " << paired->path()
              << "\n";
  }
};

}  // namespace

std::vector<OptionSpec> CompareOptions() {
  return SpecsOf("compare", &DeclareOptions);
}

int RunCompare(int argc, char** argv) {
  CompareArgs a;
  OptionTable t("compare");
  DeclareOptions(t, a);
  po::variables_map vm;
  if (!Parse(
          argc, argv, t.description(), vm,
          "Usage: iclprobe compare --checkpoint FILE [--checkpoint FILE ...] [options]\n\n"
          "Compares trained learners with classical ones on the same seeded prompts: squared\n"
          "prediction difference (SPD / d) and implicit linear weight difference (ILWD / d) per\n"
          "number of examples k, and how linear each trained learner is (implicit-fit R2).",
          "iclprobe compare --checkpoint checkpoints/d4_l8_h64.h5 --learners "
          "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3 --prompts 2000 --seed 3 "
          "--csv cmp.csv"))
    return 0;
  if (a.checkpoints.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  std::vector<std::string> names;
  const std::vector<learners::CheckpointInfo> infos = ReadCheckpoints(a.checkpoints, names);
  analysis::CompareRequest& req = a.req;
  data::TaskConfig& task = req.task;
  task = infos[0].train.task;
  task.fixed_w = false;
  if (vm.count("n")) task.n = a.n;
  if (vm.count("noise")) task.noise = a.noise;
  if (vm.count("w-scale")) task.w_scale = a.w_scale;
  req.all_pairs = vm.count("all-pairs") > 0;
  req.Validate();  // before any work
  for (const auto& info : infos)
    learners::CheckReadsTask(info, task);
  CheckThreads(a.threads);
  std::unique_ptr<CompareOutputs> out;
  if (vm.count("csv"))
    out = std::make_unique<CompareOutputs>(a.csv, a.checkpoints, vm.count("force") > 0);
  SetThreads(a.threads);

  std::vector<analysis::LearnerUnderTest> models;
  for (std::size_t c = 0; c < infos.size(); ++c) {
    // Each checkpoint is compared on prompts of its own training task (noise, scale), unless
    // options override them: the layout of the paper's noisy-regime table.
    data::TaskConfig tc = infos[c].train.task;
    tc.fixed_w = false;
    tc.n = task.n;
    if (vm.count("noise")) tc.noise = task.noise;
    if (vm.count("w-scale")) tc.w_scale = task.w_scale;
    models.push_back(
        analysis::TransformerUnderTest(names[c], tc, learners::LoadCheckpoint(infos[c].path)));
  }
  Progress progress("compare",
                    static_cast<long long>(infos.size()) * std::min(req.ilwd_prompts, req.prompts),
                    vm.count("quiet") > 0, "contexts");
  const analysis::CompareResult result =
      analysis::RunCompare(models, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  analysis::PrintCompareSummary(std::cout, result, req.learner_specs);
  if (out) out->Write(result);
  return 0;
}

}  // namespace icl::cli
