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
#include "data/output.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

int RunCompare(int argc, char** argv) {
  std::vector<std::string> checkpoints;
  std::string learner_specs = "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3",
              csv;
  int prompts = 2000, queries = 0, ilwd_prompts = 200, threads = 0, n = 0, fit_prompts = 500;
  std::uint64_t seed = 3;
  double noise = -1, w_scale = -1;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("checkpoint,c", po::value(&checkpoints)->composing(), "trained learner (repeatable: several give the "
       "matrix learners x checkpoints of mean SPD)")
      ("learners", po::value(&learner_specs)->default_value(learner_specs), "reference learners: ols, "
       "ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], sgd:ALPHA, knn:K[:weighted], zero; and gd:fit, "
       "gd:fit:STEPS, sgd:fit, ridge:fit: the family's member closest to each checkpoint, its step "
       "size or lambda fitted on --fit-prompts prompts disjoint from the scored ones")
      ("fit-prompts", po::value(&fit_prompts)->default_value(fit_prompts), "prompts (after the "
       "scored ones in the seeded stream) on which the :fit learners are fitted")
      ("prompts,N", po::value(&prompts)->default_value(prompts), "prompts for SPD")
      ("seed", po::value(&seed)->default_value(seed), "prompt-set (and query) seed")
      ("queries", po::value(&queries)->default_value(queries), "query points per context for the implicit "
       "weights (0 = 2(d+1); at least d+1)")
      ("ilwd-prompts", po::value(&ilwd_prompts)->default_value(ilwd_prompts), "contexts (the first prompts) "
       "used for ILWD and the implicit-fit R2")
      ("n", po::value(&n), "examples per prompt (default: the first checkpoint's training n)")
      ("noise", po::value(&noise), "label noise sigma (default: the first checkpoint's)")
      ("w-scale", po::value(&w_scale), "weight scale tau (default: the first checkpoint's)")
      ("all-pairs", "also compare every pair of reference learners")
      ("csv", po::value(&csv), "tidy CSV: model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted; the implicit-fit R2 goes "
       "to <csv stem>.linearity.csv (model,k,r2,contexts), the paired table (each learner's "
       "difference from the diagonal ridge, column minima and their significance) to "
       "<csv stem>.paired.csv")
      ("force", "overwrite existing CSV files")
      ("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(opts, &threads);
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
          "Usage: iclprobe compare --checkpoint FILE [--checkpoint FILE ...] [options]\n\n"
          "Compares trained learners with classical ones on the same seeded prompts: squared\n"
          "prediction difference (SPD / d) and implicit linear weight difference (ILWD / d) per\n"
          "number of examples k, and how linear each trained learner is (implicit-fit R2).",
          "iclprobe compare --checkpoint checkpoints/d4_l8_h64.h5 --learners "
          "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3 --prompts 2000 --seed 3 "
          "--csv cmp.csv"))
    return 0;
  if (checkpoints.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  RequirePositive("prompts", prompts);
  RequirePositive("ilwd-prompts", ilwd_prompts);
  if (fit_prompts < 2 || fit_prompts > 1000000)
    throw std::invalid_argument("--fit-prompts: expected 2..1000000, got " +
                                std::to_string(fit_prompts));
  std::vector<learners::CheckpointInfo> infos;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    data::RequireRegularInput(checkpoints[i], "checkpoint");
    for (std::size_t j = 0; j < i; ++j)
      if (data::IdOf(checkpoints[i]) == data::IdOf(checkpoints[j]))
        throw std::invalid_argument("--checkpoint: '" + checkpoints[i] + "' is given twice");
    infos.push_back(learners::ReadCheckpointInfo(checkpoints[i]));
  }
  // Each checkpoint's name in the tables: its file stem, or its path where stems collide.
  std::vector<std::string> names;
  for (const auto& c : checkpoints) {
    const std::string stem = std::filesystem::path(c).stem().string();
    int same = 0;
    for (const auto& o : checkpoints)
      same += std::filesystem::path(o).stem().string() == stem;
    names.push_back(same > 1 ? c : stem);
  }
  data::TaskConfig task = infos[0].train.task;
  task.fixed_w = false;
  if (vm.count("n")) task.n = n;
  if (vm.count("noise")) RequireNonNegative("noise", noise), task.noise = noise;
  if (vm.count("w-scale")) RequirePositive("w-scale", w_scale), task.w_scale = w_scale;
  task.Validate();
  for (const auto& info : infos)
    learners::CheckReadsTask(info, task);
  analysis::CheckLearnerSpecs(learner_specs, task);  // before any work
  if (queries != 0 && queries < task.d + 1)
    throw std::invalid_argument(
        "--queries: the implicit-weight fit needs at least d+1 = " + std::to_string(task.d + 1) +
        " query points, got " + std::to_string(queries));
  CheckThreads(threads);
  const bool force = vm.count("force") > 0;
  std::unique_ptr<data::AtomicOutput> out, lin_out, paired_out;
  if (vm.count("csv")) {
    std::filesystem::path lp(csv);
    lp.replace_extension("");
    const std::string lin = lp.string() + ".linearity.csv";
    const std::string paired = lp.string() + ".paired.csv";
    data::RequireDistinctOutputs({{"csv", csv}, {"csv", lin}, {"csv", paired}});
    out = std::make_unique<data::AtomicOutput>(
        csv, "csv", data::OutputOptions{force, checkpoints, false, true});
    lin_out = std::make_unique<data::AtomicOutput>(
        lin, "csv", data::OutputOptions{force, checkpoints, false, true});
    paired_out = std::make_unique<data::AtomicOutput>(
        paired, "csv", data::OutputOptions{force, checkpoints, false, true});
  }
  SetThreads(threads);

  analysis::CompareRequest req;
  req.learner_specs = learner_specs;
  req.prompts = prompts;
  req.seed = seed;
  req.queries = queries;
  req.ilwd_prompts = ilwd_prompts;
  req.all_pairs = vm.count("all-pairs") > 0;
  req.fit_prompts = fit_prompts;
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
                    static_cast<long long>(infos.size()) * std::min(ilwd_prompts, prompts),
                    vm.count("quiet") > 0, "contexts");
  const analysis::CompareResult result =
      analysis::RunCompare(models, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  analysis::PrintCompareSummary(std::cout, result, learner_specs);

  if (out) {
    std::ostringstream f, g, h;
    analysis::WriteCompareCsv(f, result);
    analysis::WriteLinearityCsv(g, result);
    analysis::WritePairedCsv(h, analysis::MakePairedTable(result));
    out->WriteText(f.str());
    lin_out->WriteText(g.str());
    paired_out->WriteText(h.str());
    // All complete and synced before any takes its final name.
    out->Commit();
    lin_out->Commit();
    paired_out->Commit();
    std::cout << "wrote " << out->path() << ", " << lin_out->path() << " and " << paired_out->path()
              << "\n";
  }
  return 0;
}

}  // namespace icl::cli
