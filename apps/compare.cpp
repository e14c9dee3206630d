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
#include "learners/budget_curve.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"
#include "learners/convergence.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct CompareArgs {
  std::vector<std::string> checkpoints, cells, halves, budgets;
  std::string csv, plot_dir, budget_window;
  int threads = 0, n = 0;
  double noise = -1, w_scale = -1;
  ShiftArgs shifts;
  analysis::CompareRequest req;
};

void DeclareCompareOptions(OptionTable& t, CompareArgs& a) {
  // clang-format off
  t.List("checkpoint,c", &a.checkpoints, "checkpoints", "trained learner (repeatable: several give the "
       "matrix learners x checkpoints of mean SPD)");
  t.List("cell", &a.cells, "cells", "NAME=FILE,FILE,...: checkpoints of one recipe that differ only "
       "by training seed (repeatable); each verdict then carries an interval over seeds and "
       "prompts (two-stage bootstrap) and says whether every seed agrees; e.g. "
       "--cell d8=s1.h5,s2.h5,s3.h5");
  t.List("half", &a.halves, "halves", "a half-budget run of a compared checkpoint (the same "
       "recipe and seed, half the steps and warmup): a --budget, kept for older command lines");
  t.Switch("budget-verdicts", "with --budget: also compare each shorter budget, as a cell of its "
       "own named CELL@STEPS (its seeds at that budget), on the same prompts, and say at which k "
       "its closest learner differs from its cell's; a window verdict that differs and that the "
       "separation rule resolves is flagged 'changes with training'");
  t.List("budget", &a.budgets, "budgets", "a shorter training budget of a compared checkpoint "
       "(the same recipe and seed, T/2^j steps and warmup; repeatable; --half runs count too): "
       "the checkpoint's excess error over the Bayes predictor at each budget and the power law "
       "e(T) = a T^-b fitted to it, b with its 95% interval (three or more budgets) and the "
       "excess extrapolated to 4T, or 'plateau' where the excess stops falling; to <csv "
       "stem>.budgets.csv and .budget_fit.csv");
  t.Optional("budget-window", &a.budget_window, "budget_window", "the k that --budget's excess "
       "averages over, a comma list (default: the verdicts' window, every k but d and d+1)");
  t.Value("learners", &a.req.learner_specs, "learner_specs", "reference learners: ols, "
       "ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], sgd:ALPHA, newton:STEPS (Fu et al.), "
       "newton:STEPS:C[:LAMBDA], knn:K[:weighted], zero; on a task family dmmse, bayes-mix, "
       "oracle-ridge, bayes-sparse, lasso:LAMBDA; and the family's member closest to each "
       "checkpoint, fitted on --fit-prompts prompts disjoint from the scored ones: gd:fit (alpha "
       "of one step), gd:fit:STEPS, gd:fit:LO..HI (alpha and the number of steps), newton:fit "
       "(C and K of newton:K:C, K in 1..30), newton:fit:STEPS, newton:fit:LO..HI, sgd:fit, ridge:fit, "
       "lasso:fit");
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
       "to <csv stem>.cells.csv, the fitted lambda or C of ridge:fit and newton:fit over each "
       "cell's seeds, with its interval and whether it is OLS-like, to <csv stem>.fitted.csv");
  t.Optional("plot-dir", &a.plot_dir, "plot_dir", "draw each cell's SPD / d per k (log scale, "
       "95% intervals over seeds and prompts) with gnuplot into this folder (PNG and SVG)");
  t.Switch("force", "overwrite existing CSV files");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddShiftOptions(t, &a.shifts, /*query=*/true);
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Input("cell", {}, /*named_list=*/true).Input("half").Input("budget");
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

// The CSV and the two files beside it, all written or none.
struct CompareOutputs {
  std::unique_ptr<core::AtomicOutput> spd, linearity, paired, verdicts, cells, fitted;
  std::unique_ptr<core::AtomicOutput> budgets, budget_fit;

  CompareOutputs(const std::string& csv, const std::vector<std::string>& inputs, bool force,
                 bool with_budgets) {
    std::filesystem::path lp(csv);
    lp.replace_extension("");
    const std::string lin = lp.string() + ".linearity.csv";
    const std::string pair = lp.string() + ".paired.csv";
    const std::string verd = lp.string() + ".verdicts.csv";
    const std::string cell = lp.string() + ".cells.csv";
    const std::string fitted_params = lp.string() + ".fitted.csv";
    const std::string bud = lp.string() + ".budgets.csv";
    const std::string fit = lp.string() + ".budget_fit.csv";
    core::RequireDistinctOutputs({{"csv", csv},
                                  {"csv", lin},
                                  {"csv", pair},
                                  {"csv", verd},
                                  {"csv", cell},
                                  {"csv", fitted_params},
                                  {"csv", bud},
                                  {"csv", fit}});
    const core::OutputOptions o{force, inputs, false, true};
    spd = std::make_unique<core::AtomicOutput>(csv, "csv", o);
    linearity = std::make_unique<core::AtomicOutput>(lin, "csv", o);
    paired = std::make_unique<core::AtomicOutput>(pair, "csv", o);
    verdicts = std::make_unique<core::AtomicOutput>(verd, "csv", o);
    cells = std::make_unique<core::AtomicOutput>(cell, "csv", o);
    fitted = std::make_unique<core::AtomicOutput>(fitted_params, "csv", o);
    if (with_budgets) {
      budgets = std::make_unique<core::AtomicOutput>(bud, "csv", o);
      budget_fit = std::make_unique<core::AtomicOutput>(fit, "csv", o);
    }
  }

  void Write(const analysis::CompareResult& result, const analysis::CellAnalysis& analysis,
             const std::vector<learners::BudgetCurve>& curves) {
    std::ostringstream f, g, h, v, c, p;
    analysis::WriteCompareCsv(f, result);
    analysis::WriteLinearityCsv(g, result);
    analysis::WritePairedCsv(h, analysis::MakePairedTable(result));
    analysis::WriteVerdictsCsv(v, analysis);
    analysis::WriteCellCurvesCsv(c, analysis);
    analysis::WriteFittedCsv(p, analysis);
    spd->WriteText(f.str());
    linearity->WriteText(g.str());
    paired->WriteText(h.str());
    verdicts->WriteText(v.str());
    cells->WriteText(c.str());
    fitted->WriteText(p.str());
    if (budgets) {
      std::ostringstream b, fit;
      learners::WriteBudgetCurveCsv(b, curves);
      learners::WriteBudgetFitCsv(fit, curves);
      budgets->WriteText(b.str());
      budget_fit->WriteText(fit.str());
    }
  }
  // All complete and synced before any takes its final name.
  void Commit() {
    for (auto* o :
         {spd.get(), linearity.get(), paired.get(), verdicts.get(), cells.get(), fitted.get()})
      o->Commit();
    if (budgets) budgets->Commit(), budget_fit->Commit();
    std::cout << "wrote " << spd->path() << ", " << linearity->path() << ", " << paired->path()
              << ", " << verdicts->path() << ", " << cells->path() << " and " << fitted->path()
              << "\n";
    if (budgets) std::cout << "wrote " << budgets->path() << " and " << budget_fit->path() << "\n";
  }
};

// The cell whose models include `model`.
const analysis::Cell& OwnerOf(const std::vector<analysis::Cell>& cells, const std::string& model) {
  return *std::find_if(cells.begin(), cells.end(), [&](const analysis::Cell& c) {
    return std::find(c.models.begin(), c.models.end(), model) != c.models.end();
  });
}

// A shorter budget compared as a learner under test: its model's name (the full run's, then
// @STEPS), its checkpoint and the index of its full run among the compared checkpoints.
struct ShortRun {
  std::string model;
  std::string path;
  std::size_t full = 0;
};

// Every shorter budget of `groups` (each ends with its compared run) as a learner under test,
// and the cells they form: CELL@STEPS holds the cell's seeds at that budget. `pairs` receives
// (cell, its shorter budget's cell), in order of the cells, then of the steps, descending.
std::vector<ShortRun> BudgetCells(const std::vector<std::vector<learners::CheckpointInfo>>& groups,
                                  const std::vector<learners::CheckpointInfo>& infos,
                                  const std::vector<std::string>& names,
                                  std::vector<analysis::Cell>& cells,
                                  std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<ShortRun> runs;
  std::vector<analysis::Cell> added;
  for (const auto& cell : cells)
    for (const auto& group : groups) {
      const auto full = std::find_if(infos.begin(), infos.end(),
                                     [&](const auto& i) { return i.path == group.back().path; });
      const std::size_t j = static_cast<std::size_t>(full - infos.begin());
      if (&OwnerOf(cells, names[j]) != &cell) continue;
      for (std::size_t r = group.size() - 1; r-- > 0;) {
        const std::string steps = std::to_string(group[r].train.steps);
        const std::string name = cell.name + "@" + steps;
        runs.push_back({names[j] + "@" + steps, group[r].path, j});
        auto it = std::find_if(added.begin(), added.end(),
                               [&](const analysis::Cell& c) { return c.name == name; });
        if (it == added.end()) {
          for (const auto& c : cells)
            if (c.name == name)
              throw std::invalid_argument("--budget-verdicts: the name '" + name +
                                          "' of a shorter budget's cell is taken by another cell");
          added.push_back({name, {}});
          it = added.end() - 1;
        }
        it->models.push_back(runs.back().model);
      }
    }
  for (auto& c : added) {
    pairs.emplace_back(c.name.substr(0, c.name.rfind('@')), c.name);
    cells.push_back(std::move(c));
  }
  return runs;
}

// Each cell's excess-error curves (those of its runs with shorter budgets): "plateau" when one
// of them is, "falling" when all fall, else "untested".
void MarkBudgetCurves(const std::vector<learners::BudgetCurve>& curves,
                      const std::vector<learners::CheckpointInfo>& infos,
                      const std::vector<std::string>& names, std::vector<analysis::Cell>& cells) {
  for (const auto& curve : curves)
    for (std::size_t j = 0; j < infos.size(); ++j)
      if (infos[j].path == curve.recipe)
        for (auto& cell : cells)
          if (std::find(cell.models.begin(), cell.models.end(), names[j]) != cell.models.end())
            cell.budget_curve =
                curve.plateau || cell.budget_curve == "plateau" ? "plateau" : "falling";
}

// The checkpoints (`infos`, named `names`), then the shorter budgets `short_runs`, loaded as
// learners under test.
std::vector<analysis::LearnerUnderTest> LearnersUnderTest(
    const std::vector<learners::CheckpointInfo>& infos, const std::vector<std::string>& names,
    const data::TaskConfig& task, const po::variables_map& vm, const ShiftArgs& shifts,
    const std::vector<ShortRun>& short_runs) {
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
    models.back().trained = infos[c].train.task;
  }
  // A shorter budget reads the prompts of its full run's task.
  for (const ShortRun& s : short_runs) {
    models.push_back(analysis::TransformerUnderTest(s.model, models[s.full].task,
                                                    learners::LoadCheckpoint(s.path)));
    models.back().trained = models[s.full].trained;
  }
  return models;
}

}  // namespace

std::vector<OptionSpec> CompareOptions() {
  return SpecsOf("compare", &DeclareCompareOptions);
}

// The shorter budgets of the compared runs (--budget files and --half runs), grouped with
// their full runs, and the window of k their excess error is averaged over.
struct BudgetArgs {
  std::vector<std::vector<learners::CheckpointInfo>> groups;
  std::vector<int> window;  // empty: each curve's summary window
};

BudgetArgs ReadBudgets(const CompareArgs& a, const po::variables_map& vm,
                       const std::vector<learners::CheckpointInfo>& infos) {
  std::vector<learners::CheckpointInfo> budget_infos, halves;
  for (const auto& h : a.halves) {
    core::RequireRegularInput(h, "half");
    halves.push_back(learners::ReadCheckpointInfo(h));
  }
  // A --half run is a --budget of T/2, refused under its own option's name.
  for (const auto& group : learners::GroupBudgets(infos, halves, "half"))
    if (group.size() != 2 || group[0].train.steps * 2 != group[1].train.steps)
      throw std::invalid_argument("--half '" + group[0].path + "': not half the steps of '" +
                                  group[1].path + "' (give it as --budget)");
  for (const auto& b : a.budgets) {
    core::RequireRegularInput(b, "budget");
    budget_infos.push_back(learners::ReadCheckpointInfo(b));
  }
  budget_infos.insert(budget_infos.end(), halves.begin(), halves.end());
  BudgetArgs out;
  out.groups = learners::GroupBudgets(infos, budget_infos, "budget");
  if (!a.budget_window.empty()) out.window = ParseInts("--budget-window", a.budget_window);
  if (vm.count("budget-window") && out.groups.empty())
    throw std::invalid_argument("--budget-window: needs a --budget (or --half) run");
  return out;
}

int RunCompare(int argc, char** argv) {
  CompareArgs a;
  OptionTable t("compare");
  DeclareCompareOptions(t, a);
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
  analysis::CompareRequest& req = a.req;
  data::TaskConfig& task = req.task;
  task = infos[0].train.task;
  task.fixed_w = false;
  req.trained = infos[0].train.task;
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
  // Every run with its shorter budgets (--budget, and --half runs), checked before any work.
  const BudgetArgs budgets = ReadBudgets(a, vm, infos);
  const auto& budget_groups = budgets.groups;
  const std::vector<int>& budget_window = budgets.window;
  // (cell, its shorter budget's cell) and the shorter budgets' learners; empty without
  // --budget-verdicts.
  std::vector<std::pair<std::string, std::string>> budget_cells;
  std::vector<ShortRun> short_runs;
  if (vm.count("budget-verdicts")) {
    if (budget_groups.empty())
      throw std::invalid_argument("--budget-verdicts: needs a --budget (or --half) run to compare");
    short_runs = BudgetCells(budget_groups, infos, names, cells, budget_cells);
  }
  if (vm.count("csv"))
    out = std::make_unique<CompareOutputs>(a.csv, inputs, vm.count("force") > 0,
                                           !budget_groups.empty());
  const std::string gnuplot =
      vm.count("plot-dir") ? core::FindProgram("gnuplot", "ICLPROBE_GNUPLOT") : "";
  SetThreads(a.threads);

  std::vector<learners::BudgetCurve> curves;
  for (const auto& runs : budget_groups) {
    const data::TaskConfig& rt = runs.back().train.task;
    curves.push_back(learners::MeasureBudgetCurve(
        runs, budget_window.empty() ? analysis::SummaryWindow(rt.d, rt.n) : budget_window));
    learners::PrintBudgetCurve(std::cout, curves.back());
  }
  MarkBudgetCurves(curves, infos, names, cells);

  const std::vector<analysis::LearnerUnderTest> models =
      LearnersUnderTest(infos, names, task, vm, a.shifts, short_runs);
  Progress progress("compare",
                    static_cast<long long>(models.size()) * std::min(req.ilwd_prompts, req.prompts),
                    vm.count("quiet") > 0, "contexts");
  const analysis::CompareResult result =
      analysis::RunCompare(models, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  const analysis::CellAnalysis verdicts = analysis::AnalyseCells(result, cells);
  analysis::PrintCompareSummary(std::cout, result, req.learner_specs);
  analysis::PrintVerdicts(std::cout, verdicts);
  if (!budget_cells.empty())
    analysis::PrintBudgetAgreement(std::cout,
                                   analysis::CompareWithShorterBudgets(verdicts, budget_cells));
  // Plots are planned and their folder checked before anything is written; the tables take
  // their final names only after the plots are drawn.
  analysis::PlotFiles plots;
  if (!gnuplot.empty()) {
    plots = analysis::PlanCellPlots(verdicts);
    analysis::PreparePlotFolder(plots, a.plot_dir, inputs, vm.count("force") > 0, "compare");
  }
  if (out) out->Write(result, verdicts, curves);
  if (!gnuplot.empty()) analysis::WritePlots(plots, a.plot_dir, gnuplot);
  if (out) out->Commit();
  return 0;
}

}  // namespace icl::cli
