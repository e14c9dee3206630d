// iclprobe inspect: summarises a checkpoint, and exports a copy without /train_state (the
// form in which learners are shipped).
#include <fmt/format.h>
#include <filesystem>
#include <iostream>

#include "analysis/compare_run.hpp"
#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "construct/construct.hpp"
#include "core/output.hpp"
#include "learners/budget_curve.hpp"
#include "learners/checkpoint.hpp"
#include "learners/convergence.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct InspectArgs {
  std::string checkpoint, export_path, half, budget_window;
  std::vector<std::string> budgets;
  int threads = 0;
};

void DeclareInspectOptions(OptionTable& t, InspectArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.checkpoint, "checkpoint", "checkpoint to describe (also the first positional argument)");
  t.Optional("export", &a.export_path, "export_path", "write a copy without /train_state (cannot be resumed; smaller)");
  t.Optional("half", &a.half, "half", "a run of the same recipe with half the steps and half the "
       "warmup: test the convergence rule (at every k != d, d+1 the half run's held-out error / d "
       "within max(5%, the paired 95% interval) of this one's), from both evaluation logs and "
       "both learners re-run on the logs' evaluation prompts");
  t.List("budget", &a.budgets, "budgets", "a shorter training budget of this checkpoint (the "
       "same recipe and seed, T/2^j steps and warmup; repeatable): the excess error over the "
       "Bayes predictor at each budget, re-run on the evaluation prompts, and the power law "
       "e(T) = a T^-b fitted to it (b with its 95% interval from three budgets on, the excess "
       "extrapolated to 4T), or 'plateau' where the excess stops falling");
  t.Optional("budget-window", &a.budget_window, "budget_window", "the k that --budget's excess "
       "averages over, a comma list (default: every k but d and d+1)");
  t.Switch("force", "overwrite an existing --export file");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  // A half run is read with its evaluation log beside it.
  t.Input("checkpoint").Input("half", {".train.csv"}).Input("budget").Output("export");
}

}  // namespace

std::vector<OptionSpec> InspectOptions() {
  return SpecsOf("inspect", &DeclareInspectOptions);
}

int RunInspect(int argc, char** argv) {
  InspectArgs a;
  auto& checkpoint = a.checkpoint;
  auto& export_path = a.export_path;
  OptionTable t("inspect");
  DeclareInspectOptions(t, a);
  po::options_description& opts = t.description();
  po::positional_options_description pos;
  pos.add("checkpoint", 1);
  opts.add_options()("help,h", "show this help and exit");
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout
        << "Usage: iclprobe inspect CHECKPOINT [--export OUT]\n\n"
           "Prints a checkpoint's model and training configuration, step and parameter count;\n"
           "with --budget, its excess error over the Bayes predictor by training budget and the\n"
           "power law fitted to it; with --half, the convergence rule's test.\n\n"
        << opts
        << "\nExamples:\n  iclprobe inspect runs/d4l8.h5 --export checkpoints/d4l8.h5\n"
           "  iclprobe inspect runs/d8_40k.h5 --budget runs/d8_20k.h5 --budget runs/d8_10k.h5\n";
    return 0;
  }
  po::notify(vm);
  if (checkpoint.empty())
    throw std::invalid_argument("inspect: give a checkpoint file (see --help)");
  core::RequireRegularInput(checkpoint, "checkpoint");
  if (vm.count("half")) {
    if (a.half.empty()) throw std::invalid_argument("--half: expected a checkpoint, got ''");
    core::RequireRegularInput(a.half, "half");
  }
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  so.inputs = InputPaths(t.specs(), vm);  // --force never replaces a file this run reads
  so.field = "export";
  if (vm.count("export") && export_path.empty())
    throw std::invalid_argument("--export: expected the file to write, got an empty name");
  // The lock first, held to the end: nothing touches the export's names (its partial file
  // among them) while another run may be writing them.
  std::unique_ptr<core::OutputLock> lock;
  if (const auto c = construct::ReadConstruction(checkpoint)) {
    const bool newton = construct::ParseProgram(c->program).kind == construct::Program::kNewton;
    std::cout << fmt::format(
        "construction program {} ({}, {} step(s)){}, {} ops\n", c->program,
        newton ? fmt::format("start C {:g}, lambda {:g}", c->start, c->lambda)
               : fmt::format("alpha {:g}", c->alpha),
        c->steps,
        c->rotation_seed
            ? fmt::format(", rotated (seed {}): every state is Q h with Q in "
                          "/construction/rotation, rows below are coordinates of h = Q^T h'",
                          *c->rotation_seed)
            : "",
        c->ops.size());
    if (c->distractors > 0 || c->context_distractors > 0 || !c->decoy.empty() || c->nuisance > 0)
      std::cout << fmt::format(
          "  disguise: {} distractor rows, {} context distractors, decoy {}{}, nuisance sigma "
          "{:g}\n",
          c->distractors, c->context_distractors, c->decoy.empty() ? "none" : c->decoy,
          c->decoy_noise > 0 ? fmt::format(" (its own nuisance sigma {:g})", c->decoy_noise) : "",
          c->nuisance);
    for (const auto& q : c->quantities)
      std::cout << fmt::format("  {:<8} state {}{} rows {}..{} at {}: {}\n", q.name, q.layer,
                               q.last_layer > q.layer ? fmt::format("..{}", q.last_layer) : "",
                               q.rows.begin, q.rows.begin + q.rows.size - 1, q.positions,
                               q.meaning);
    for (const auto& op : c->ops)
      std::cout << "  op " << op << "\n";
  }
  if (!export_path.empty()) {
    lock = std::make_unique<core::OutputLock>(export_path, "export");
    so.lock = false;
    // Every check on the export path before any work.
    core::AtomicOutput check(export_path, "export",
                             core::OutputOptions{so.force, so.inputs, false, /*lock=*/false});
  }

  // The budgets checked before any work.
  std::vector<learners::CheckpointInfo> budget_infos;
  for (const auto& b : a.budgets) {
    core::RequireRegularInput(b, "budget");
    budget_infos.push_back(learners::ReadCheckpointInfo(b));
  }
  const auto budgets =
      learners::GroupBudgets({learners::ReadCheckpointInfo(checkpoint)}, budget_infos, "budget");
  if (vm.count("budget-window") && budgets.empty())
    throw std::invalid_argument("--budget-window: needs a --budget run");
  const std::vector<int> window =
      a.budget_window.empty() ? std::vector<int>{} : ParseInts("--budget-window", a.budget_window);
  if (!budgets.empty()) CheckThreads(a.threads), SetThreads(a.threads);

  learners::CheckpointInfo info;
  learners::Transformer model = learners::LoadCheckpoint(checkpoint, &info);
  std::cout << fmt::format(
      "checkpoint   {}\ncreated_by   {}\nstep         {} of {}\nparameters   {}\nmodel        {}\n"
      "task         {}\ntrain        {}\nresumable    {}\n",
      checkpoint, info.created_by.empty() ? "(not recorded)" : info.created_by, info.step,
      info.train.steps, learners::CountParameters(*model), info.model.ToJson(),
      info.train.task.ToJson(), info.train.ToJson(),
      info.has_train_state ? "yes (/train_state present)" : "no");
  if (!a.half.empty()) {
    CheckThreads(a.threads);
    SetThreads(a.threads);
    learners::CheckpointInfo full = learners::ReadCheckpointInfo(checkpoint);
    learners::PrintConvergence(
        std::cout, learners::TestConvergence(full, learners::ReadCheckpointInfo(a.half)));
  }
  if (!budgets.empty()) {
    const data::TaskConfig& rt = info.train.task;
    learners::PrintBudgetCurve(
        std::cout,
        learners::MeasureBudgetCurve(
            budgets.front(), window.empty() ? analysis::SummaryWindow(rt.d, rt.n) : window));
  }
  if (!export_path.empty()) {
    learners::SaveCheckpoint(export_path, model, info.train, info.step, /*optimizer=*/nullptr, so);
    std::cout << "exported " << export_path << " (without /train_state)\n";
  }
  return 0;
}

}  // namespace icl::cli
