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
#include "analysis/verdicts.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/output.hpp"
#include "core/subprocess.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"
#include "learners/convergence.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct CompareArgs {
  std::vector<std::string> checkpoints, cells, halves;
  std::string csv, plot_dir;
  int threads = 0, n = 0;
  double noise = -1, w_scale = -1;
  ShiftArgs shifts;
  analysis::CompareRequest req;
};

void DeclareOptions(OptionTable& t, CompareArgs& a) {
  // clang-format off
  t.List("checkpoint,c", &a.checkpoints, "checkpoints", "trained learner (repeatable: several give the "
       "matrix learners x checkpoints of mean SPD)");
  t.List("cell", &a.cells, "cells", "NAME=FILE,FILE,...: checkpoints of one recipe that differ only "
       "by training seed (repeatable); each verdict then carries an interval over seeds and "
       "prompts (two-stage bootstrap) and says whether every seed agrees; e.g. "
       "--cell d8=s1.h5,s2.h5,s3.h5");
  t.List("half", &a.halves, "halves", "a half-budget run (the recipe of a compared checkpoint, "
       "its seed, half the steps and warmup; repeatable, one per cell is enough): test the "
       "convergence rule on its full run (held-out error / d within max(5%, the paired 95% "
       "interval) at every k != d, d+1) and mark the cell's verdicts converged or not");
  t.Switch("half-verdict", "with --half: also compare each half-budget run, as a cell of its "
       "own named CELL@half, on the same prompts, and say at which k its closest learner differs "
       "from its cell's: whether the verdict depends on the training length, which the "
       "convergence rule cannot say for a learner whose error still falls with every doubling");
  t.Value("learners", &a.req.learner_specs, "learner_specs", "reference learners: ols, "
       "ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], sgd:ALPHA, newton:STEPS (Fu et al.), "
       "newton:STEPS:C[:LAMBDA], knn:K[:weighted], zero; and the family's member closest to each "
       "checkpoint, fitted on --fit-prompts prompts disjoint from the scored ones: gd:fit (alpha "
       "of one step), gd:fit:STEPS, gd:fit:LO..HI (alpha and the number of steps), newton:fit "
       "(C and K of newton:K:C, K in 1..30), newton:fit:STEPS, newton:fit:LO..HI, sgd:fit, ridge:fit");
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
  t.Optional("csv", &a.csv, "csv", "tidy CSV: model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted,"
       "fitted_steps; the implicit-fit R2 goes to <csv stem>.linearity.csv (model,k,r2,contexts), "
       "the paired table (each learner's difference from the diagonal ridge, column minima and "
       "their significance) to <csv stem>.paired.csv, the verdicts per k and over the window "
       "k != d, d+1 to <csv stem>.verdicts.csv, each cell's SPD per k with intervals over seeds "
       "to <csv stem>.cells.csv");
  t.Optional("plot-dir", &a.plot_dir, "plot_dir", "draw each cell's SPD / d per k (log scale, "
       "95% intervals over seeds and prompts) with gnuplot into this folder (PNG and SVG)");
  t.Switch("force", "overwrite existing CSV files");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddShiftOptions(t, &a.shifts, /*query=*/true);
  AddThreadsOption(t, &a.threads);
  // A half run is read with its evaluation log beside it.
  t.Input("checkpoint").Input("cell", {}, /*named_list=*/true).Input("half", {".train.csv"});
  t.Output("csv").Output("plot-dir");
}

// One --cell value: NAME=FILE,FILE,...
struct CellArg {
  std::string name;
  std::vector<std::string> files;
};

CellArg ParseCell(const std::string& text) {
  const auto eq = text.find('=');
  CellArg c;
  const std::string shown = text.size() > 200 ? text.substr(0, 200) + "..." : text;
  const std::string expected =
      "--cell: expected NAME=FILE,FILE,... (NAME of letters, digits, '_', '-', '.'), e.g. "
      "--cell d8=s1.h5,s2.h5,s3.h5; got '" +
      shown + "'";
  if (eq == std::string::npos || eq == 0) throw std::invalid_argument(expected);
  c.name = text.substr(0, eq);
  for (const char ch : c.name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.')
      throw std::invalid_argument(expected);
  c.files = ListEntries("--cell", text.substr(eq + 1));
  return c;
}

// Each checkpoint once, read; its name in the tables: its file stem, or its path where stems
// collide; a cell's checkpoints are NAME/seedS.
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

// The cells of the command line, their checkpoints appended to `files` (after the single
// ones); refuses a cell whose checkpoints are not seeds of one recipe.
std::vector<CellArg> ReadCells(const std::vector<std::string>& args,
                               std::vector<std::string>& files) {
  std::vector<CellArg> cells;
  for (const auto& text : args) {
    cells.push_back(ParseCell(text));
    for (const auto& c : cells)
      if (&c != &cells.back() && c.name == cells.back().name)
        throw std::invalid_argument("--cell: the name '" + c.name + "' is given twice");
    for (const auto& f : cells.back().files)
      files.push_back(f);
  }
  return cells;
}

void CheckCell(const CellArg& cell, const std::vector<learners::CheckpointInfo>& infos,
               std::size_t first) {
  for (std::size_t i = 1; i < cell.files.size(); ++i) {
    const auto &a = infos[first], &b = infos[first + i];
    const std::string diff = learners::RecipeDifference(a, b);
    if (!diff.empty())
      throw std::invalid_argument("--cell " + cell.name + ": '" + b.path +
                                  "' is not a seed of the recipe of '" + a.path + "' (" + diff +
                                  "); a seed interval needs checkpoints of one cell");
    for (std::size_t j = 0; j < i; ++j)
      if (infos[first + j].train.seed == b.train.seed)
        throw std::invalid_argument("--cell " + cell.name + ": '" + infos[first + j].path +
                                    "' and '" + b.path + "' have the same seed " +
                                    std::to_string(b.train.seed));
  }
}

// Each --half file with the index of its full run among `infos` (the same recipe and seed,
// twice the steps and warmup); refused before any work when it has none.
std::vector<std::pair<learners::CheckpointInfo, std::size_t>> MatchHalves(
    const std::vector<std::string>& halves, const std::vector<learners::CheckpointInfo>& infos) {
  std::vector<std::pair<learners::CheckpointInfo, std::size_t>> out;
  for (const auto& h : halves) {
    core::RequireRegularInput(h, "half");
    learners::CheckpointInfo info = learners::ReadCheckpointInfo(h);
    std::string why = "no checkpoint is compared";
    std::size_t full = infos.size();
    for (std::size_t j = 0; j < infos.size() && full == infos.size(); ++j) {
      const std::string m = learners::HalfRunMismatch(infos[j], info);
      if (m.empty() && infos[j].train.seed == info.train.seed)
        full = j;
      else if (j == 0 || m.empty())
        why = "'" + infos[j].path + "': " + (m.empty() ? "another seed" : m);
    }
    if (full == infos.size())
      throw std::invalid_argument("--half '" + h +
                                  "': no --checkpoint or --cell file is its full run (the same "
                                  "recipe and seed with twice the steps and warmup; " +
                                  why + ")");
    for (const auto& [other, j] : out)
      if (j == full)
        throw std::invalid_argument("--half: '" + other.path + "' and '" + h +
                                    "' are both half runs of '" + infos[j].path + "'");
    out.emplace_back(std::move(info), full);
  }
  return out;
}

// The CSV and the two files beside it, all written or none.
struct CompareOutputs {
  std::unique_ptr<core::AtomicOutput> spd, linearity, paired, verdicts, cells, convergence;

  CompareOutputs(const std::string& csv, const std::vector<std::string>& inputs, bool force,
                 bool with_convergence) {
    std::filesystem::path lp(csv);
    lp.replace_extension("");
    const std::string lin = lp.string() + ".linearity.csv";
    const std::string pair = lp.string() + ".paired.csv";
    const std::string verd = lp.string() + ".verdicts.csv";
    const std::string cell = lp.string() + ".cells.csv";
    const std::string conv = lp.string() + ".convergence.csv";
    core::RequireDistinctOutputs(
        {{"csv", csv}, {"csv", lin}, {"csv", pair}, {"csv", verd}, {"csv", cell}, {"csv", conv}});
    const core::OutputOptions o{force, inputs, false, true};
    spd = std::make_unique<core::AtomicOutput>(csv, "csv", o);
    linearity = std::make_unique<core::AtomicOutput>(lin, "csv", o);
    paired = std::make_unique<core::AtomicOutput>(pair, "csv", o);
    verdicts = std::make_unique<core::AtomicOutput>(verd, "csv", o);
    cells = std::make_unique<core::AtomicOutput>(cell, "csv", o);
    if (with_convergence) convergence = std::make_unique<core::AtomicOutput>(conv, "csv", o);
  }

  void Write(const analysis::CompareResult& result, const analysis::CellAnalysis& analysis,
             const std::vector<learners::ConvergenceEvidence>& evidence) {
    std::ostringstream f, g, h, v, c;
    analysis::WriteCompareCsv(f, result);
    analysis::WriteLinearityCsv(g, result);
    analysis::WritePairedCsv(h, analysis::MakePairedTable(result));
    analysis::WriteVerdictsCsv(v, analysis);
    analysis::WriteCellCurvesCsv(c, analysis);
    spd->WriteText(f.str());
    linearity->WriteText(g.str());
    paired->WriteText(h.str());
    verdicts->WriteText(v.str());
    cells->WriteText(c.str());
    if (convergence) {
      std::ostringstream e;
      learners::WriteConvergenceCsv(e, evidence);
      convergence->WriteText(e.str());
    }
  }
  // All complete and synced before any takes its final name.
  void Commit() {
    for (auto* o : {spd.get(), linearity.get(), paired.get(), verdicts.get(), cells.get()})
      o->Commit();
    if (convergence) convergence->Commit();
    std::cout << "wrote " << spd->path() << ", " << linearity->path() << ", " << paired->path()
              << ", " << verdicts->path() << (convergence ? ", " : " and ") << cells->path()
              << (convergence ? " and " + convergence->path() : "") << "\n";
  }
};

// Each half run compared as a cell of its own beside its full run's cell: (cell, its half run's
// cell), in the order of `halves`.
std::vector<std::pair<std::string, std::string>> HalfCells(
    const std::vector<std::pair<learners::CheckpointInfo, std::size_t>>& halves,
    const std::vector<std::string>& names, const std::vector<analysis::Cell>& cells) {
  std::vector<std::pair<std::string, std::string>> half_cells;
  for (std::size_t h = 0; h < halves.size(); ++h) {
    const std::string& full = names[halves[h].second];
    const auto owner = std::find_if(cells.begin(), cells.end(), [&](const analysis::Cell& c) {
      return std::find(c.models.begin(), c.models.end(), full) != c.models.end();
    });
    const std::string half_cell = owner->name + "@half";
    for (const auto& c : cells)
      if (c.name == half_cell)
        throw std::invalid_argument("--half-verdict: the name '" + half_cell +
                                    "' of a half run's cell is taken by another cell");
    half_cells.emplace_back(owner->name, half_cell);
  }
  return half_cells;
}

// The checkpoints (`infos`, named `names`), then the half runs of `half_cells`, loaded as
// learners under test.
std::vector<analysis::LearnerUnderTest> LearnersUnderTest(
    const std::vector<learners::CheckpointInfo>& infos, const std::vector<std::string>& names,
    const data::TaskConfig& task, const po::variables_map& vm, const ShiftArgs& shifts,
    const std::vector<std::pair<learners::CheckpointInfo, std::size_t>>& halves,
    const std::vector<std::pair<std::string, std::string>>& half_cells) {
  std::vector<analysis::LearnerUnderTest> models;
  for (std::size_t c = 0; c < infos.size(); ++c) {
    // Each checkpoint is compared on prompts of its own training task (noise, scale), unless
    // options override them: the layout of the paper's noisy-regime table.
    data::TaskConfig tc = infos[c].train.task;
    tc.fixed_w = false;
    tc.n = task.n;
    if (vm.count("noise")) tc.noise = task.noise;
    if (vm.count("w-scale")) tc.w_scale = task.w_scale;
    ApplyShifts(vm, shifts, tc);
    models.push_back(
        analysis::TransformerUnderTest(names[c], tc, learners::LoadCheckpoint(infos[c].path)));
  }
  // A half run reads the prompts of its full run's task.
  for (std::size_t i = 0; i < half_cells.size(); ++i) {
    const auto& [half, full] = halves[i];
    models.push_back(analysis::TransformerUnderTest(
        half_cells[i].first + "/half", models[full].task, learners::LoadCheckpoint(half.path)));
  }
  return models;
}

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
  if (a.checkpoints.empty() && a.cells.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner), or --cell");
  std::vector<std::string> files = a.checkpoints, names;
  const std::vector<CellArg> cell_args = ReadCells(a.cells, files);
  const std::vector<learners::CheckpointInfo> infos = ReadCheckpoints(files, names);
  std::vector<analysis::Cell> cells;
  for (std::size_t c = 0; c < a.checkpoints.size(); ++c)
    cells.push_back({names[c], {names[c]}});
  for (std::size_t c = 0, at = a.checkpoints.size(); c < cell_args.size(); ++c) {
    CheckCell(cell_args[c], infos, at);
    analysis::Cell cell{cell_args[c].name, {}};
    for (std::size_t i = 0; i < cell_args[c].files.size(); ++i, ++at) {
      names[at] = cell.name + "/seed" + std::to_string(infos[at].train.seed);
      cell.models.push_back(names[at]);
    }
    cells.push_back(std::move(cell));
  }
  const auto halves = MatchHalves(a.halves, infos);
  const bool half_verdict = vm.count("half-verdict") > 0;
  if (half_verdict && halves.empty())
    throw std::invalid_argument("--half-verdict: needs a --half run to compare");
  // (cell, its half run's cell), in the order of `halves`; empty without --half-verdict.
  const std::vector<std::pair<std::string, std::string>> half_cells =
      half_verdict ? HalfCells(halves, names, cells)
                   : std::vector<std::pair<std::string, std::string>>{};
  analysis::CompareRequest& req = a.req;
  data::TaskConfig& task = req.task;
  task = infos[0].train.task;
  task.fixed_w = false;
  if (vm.count("n")) task.n = a.n;
  if (vm.count("noise")) task.noise = a.noise;
  if (vm.count("w-scale")) task.w_scale = a.w_scale;
  ApplyShifts(vm, a.shifts, task);
  req.all_pairs = vm.count("all-pairs") > 0;
  req.Validate();  // before any work
  for (const auto& info : infos)
    learners::CheckReadsTask(info, task);
  CheckThreads(a.threads);
  std::unique_ptr<CompareOutputs> out;
  std::vector<std::string> inputs = InputPaths(t.specs(), vm);
  inputs.insert(inputs.end(), files.begin(), files.end());
  if (vm.count("csv"))
    out = std::make_unique<CompareOutputs>(a.csv, inputs, vm.count("force") > 0, !halves.empty());
  const std::string gnuplot =
      vm.count("plot-dir") ? core::FindProgram("gnuplot", "ICLPROBE_GNUPLOT") : "";
  SetThreads(a.threads);

  // The convergence evidence first (it re-runs the full and half runs on their evaluation
  // prompts); a cell is converged when each of its seeds that has a half run passes.
  std::vector<learners::ConvergenceEvidence> evidence;
  for (const auto& [half, j] : halves) {
    evidence.push_back(learners::TestConvergence(infos[j], half));
    learners::PrintConvergence(std::cout, evidence.back());
    for (auto& cell : cells)
      if (std::find(cell.models.begin(), cell.models.end(), names[j]) != cell.models.end())
        cell.converged = evidence.back().converged && cell.converged != "no" ? "yes" : "no";
  }
  for (std::size_t i = 0; i < half_cells.size(); ++i)
    cells.push_back({half_cells[i].second, {half_cells[i].first + "/half"}});

  const std::vector<analysis::LearnerUnderTest> models =
      LearnersUnderTest(infos, names, task, vm, a.shifts, halves, half_cells);
  Progress progress("compare",
                    static_cast<long long>(models.size()) * std::min(req.ilwd_prompts, req.prompts),
                    vm.count("quiet") > 0, "contexts");
  const analysis::CompareResult result =
      analysis::RunCompare(models, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  const analysis::CellAnalysis verdicts = analysis::AnalyseCells(result, cells);
  analysis::PrintCompareSummary(std::cout, result, req.learner_specs);
  analysis::PrintVerdicts(std::cout, verdicts);
  if (half_verdict)
    analysis::PrintHalfAgreement(std::cout, analysis::CompareWithHalfRuns(verdicts, half_cells));
  // Plots are planned and their folder checked before anything is written; the tables take
  // their final names only after the plots are drawn.
  analysis::PlotFiles plots;
  if (!gnuplot.empty()) {
    plots = analysis::PlanCellPlots(verdicts);
    analysis::PreparePlotFolder(plots, a.plot_dir, inputs, vm.count("force") > 0, "compare");
  }
  if (out) out->Write(result, verdicts, evidence);
  if (!gnuplot.empty()) analysis::WritePlots(plots, a.plot_dir, gnuplot);
  if (out) out->Commit();
  return 0;
}

}  // namespace icl::cli
