// iclprobe trace: which iterate of GD, Newton or the ridge path does each layer's prediction
// match, with intervals over seeds and prompts, against the learners' controls.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "analysis/trace_file.hpp"
#include "analysis/trace_run.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"
#include "core/thread_pool.hpp"
#include "learners/checkpoint.hpp"
#include "probes/runner.hpp"

namespace icl::cli {

namespace {

// What the command line sets besides the request's own fields.
struct TraceArgs {
  std::vector<std::string> checkpoints, controls, activations, control_activations;
  std::string algorithms, ks_text, layers_text, readout = "ridge", lambdas = "1e-4:1e4:17", out,
                                                csv;
  int threads = 0;
};

void DeclareTraceOptions(OptionTable& t, analysis::TraceRequest& req, TraceArgs& a) {
  // clang-format off
  t.List("checkpoint,c", &a.checkpoints, "checkpoints", "the learner (required); several "
       "(repeat the option) that differ only by training seed give intervals over seeds and "
       "prompts (two-stage bootstrap)");
  t.List("control", &a.controls, "controls", "a control model traced alike on the same "
       "prompts: one per --checkpoint (paired in order, e.g. each seed's random-init twin from "
       "train --init-only) or one for all; each layer's best similarity is then compared with "
       "the control's (paired excess with its interval)");
  t.List("activations,a", &a.activations, "activations", "read the learners' states from "
       "these activations files (extract's, every position stored; one per --checkpoint, in "
       "order) instead of a forward pass: the scored prompts are the first --prompts rows, the "
       "ridge readout's the --fit-prompts after them");
  t.List("control-activations", &a.control_activations, "control_activations", "the same for "
       "the controls (one per --control)");
  t.Optional("algorithms", &a.algorithms, "algorithms", "comma list of gd:ALPHA:T, "
       "sgd:ALPHA:T (T passes), newton:T[:C[:LAMBDA]] (T <= 100), ridge-path:HI:LO:T (T iterates "
       "after iterate 0, which predicts 0; T <= 4096); default: newton:16, gd with alpha = 1 / (2 (sqrt(n-1) + sqrt(d))^2) for 256 "
       "steps, ridge-path:1000:0.0001:29");
  t.Value("readout", &a.readout, "readout", "how a layer's state becomes a prediction: ridge "
       "(a ridge readout per layer fitted on --fit-prompts prompts, Fu et al.'s) or lens (the "
       "model's own final norm and readout)");
  t.Optional("k", &a.ks_text, "ks_text", "numbers of examples, e.g. 2,4,8 (each <= n-1: the "
       "prediction of y_(k+1)); default: 1..n-1");
  t.Optional("layers", &a.layers_text, "layers_text", "states to trace, e.g. 0,4,8 (0 = the "
       "embedding); default: every one");
  t.Value("prompts,N", &req.prompts, "req.prompts", "scored prompts");
  t.Value("fit-prompts", &req.fit_prompts, "req.fit_prompts", "prompts for the ridge readout "
       "(after the scored ones in the seeded stream)");
  t.Value("seed", &req.seed, "req.seed", "prompt seed (without --activations) and bootstrap seed");
  t.Value("lambdas", &a.lambdas, "lambdas", "the ridge readout's penalties: LO:HI:COUNT "
       "(log-spaced) or a comma list; chosen per layer by exact leave-one-out");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates for the 95% "
       "intervals");
  t.Value("batch", &req.batch, "req.batch", "prompts per read of the states");
  t.Optional("out,o", &a.out, "out", "trace file (HDF5, required)");
  t.Optional("csv", &a.csv, "csv", "tidy CSV of every (algorithm, learner|control, layer, "
       "iterate) similarity (default: the --out path with .csv); the best iterate per layer goes "
       "to <stem>.layers.csv, the rates to <stem>.rates.csv");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Input("control").Input("activations").Input("control-activations");
  t.Output("out").Output("csv");
}

// The request from the options, checked before any file is opened.
void FillTraceRequest(analysis::TraceRequest& req, const TraceArgs& a,
                      const po::variables_map& vm) {
  if (a.checkpoints.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  if (a.out.empty()) throw std::invalid_argument("--out: required (the trace file)");
  if (!a.activations.empty() && a.activations.size() != a.checkpoints.size())
    throw std::invalid_argument(fmt::format(
        "--activations: {} given for {} --checkpoint files; expected one per checkpoint",
        a.activations.size(), a.checkpoints.size()));
  if (!a.control_activations.empty() && a.control_activations.size() != a.controls.size())
    throw std::invalid_argument(fmt::format(
        "--control-activations: {} given for {} --control files; expected one per control",
        a.control_activations.size(), a.controls.size()));
  if (!a.controls.empty() && a.controls.size() != 1 && a.controls.size() != a.checkpoints.size())
    throw std::invalid_argument(fmt::format(
        "--control: {} given for {} --checkpoint files; expected one per checkpoint or one for "
        "all",
        a.controls.size(), a.checkpoints.size()));
  req.readout = analysis::ParseReadout(a.readout);
  if (req.readout == analysis::Readout::kLens && vm.count("fit-prompts") &&
      !vm["fit-prompts"].defaulted())
    throw std::invalid_argument(
        "--fit-prompts: only the ridge readout is fitted (--readout ridge)");
  if (vm.count("algorithms")) req.algorithms = SplitList("--algorithms", a.algorithms);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks_text);
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers_text);
  req.lambdas = probes::ParseLambdaGrid(a.lambdas);
}

// Each checkpoint (and its activations file) read and checked as an input of the stage.
std::vector<analysis::TraceInput> LoadInputs(const std::vector<std::string>& checkpoints,
                                             const std::vector<std::string>& activations,
                                             const std::string& option) {
  std::vector<analysis::TraceInput> out;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    analysis::TraceInput in;
    in.checkpoint = in.name = checkpoints[i];
    core::RequireRegularInput(in.checkpoint, option);
    const learners::CheckpointInfo info = learners::ReadCheckpointInfo(in.checkpoint);
    in.train_seed = info.train.seed;
    in.sha256 = core::Sha256File(in.checkpoint);
    in.model = learners::LoadCheckpoint(in.checkpoint);
    if (!activations.empty()) {
      in.activations = activations[i];
      core::RequireRegularInput(in.activations,
                                option == "checkpoint" ? "activations" : "control-activations");
      in.info = extract::ReadActivationsInfo(in.activations);
    }
    out.push_back(std::move(in));
  }
  return out;
}

// The learners of a trace are seeds of one recipe: a seed interval over anything else would
// mix recipes.
void CheckSeeds(const std::vector<std::string>& checkpoints) {
  std::vector<learners::CheckpointInfo> infos;
  for (const auto& c : checkpoints) {
    infos.push_back(learners::ReadCheckpointInfo(c));
    for (std::size_t j = 0; j + 1 < infos.size(); ++j) {
      if (core::IdOf(c) == core::IdOf(infos[j].path))
        throw std::invalid_argument("--checkpoint: '" + c + "' is given twice");
      const std::string diff = learners::RecipeDifference(infos[0], infos.back());
      if (!diff.empty())
        throw std::invalid_argument("--checkpoint: '" + c + "' is not a seed of the recipe of '" +
                                    infos[0].path + "' (" + diff + ")");
      if (infos[j].train.seed == infos.back().train.seed)
        throw std::invalid_argument("--checkpoint: '" + infos[j].path + "' and '" + c +
                                    "' have the same seed " +
                                    std::to_string(infos.back().train.seed));
    }
  }
}

}  // namespace

std::vector<OptionSpec> TraceOptions() {
  return SpecsOf("trace", &DeclareTraceOptions);
}

int RunTrace(int argc, char** argv) {
  analysis::TraceRequest req;
  TraceArgs a;
  OptionTable t("trace");
  DeclareTraceOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe trace --checkpoint FILE [--checkpoint FILE ...] --out FILE "
             "[options]\n\n"
             "How does the computation unfold through the layers? Each layer's state at the\n"
             "query (the x-token of example k+1) is read out as a prediction of y_(k+1), by a\n"
             "ridge readout per layer (Fu et al. 2023) or the model's own readout (the lens),\n"
             "and compared with the iterates t = 0..T of GD, iterative Newton and the ridge\n"
             "path on the same prompts: an SPD-based similarity and Fu et al.'s residual\n"
             "cosine per (layer, iterate), the best iterate per layer with its interval and its\n"
             "margin over the neighbouring iterates, and the rate (iterations, and doublings,\n"
             "per layer): linear in layers for a second-order method matched to itself,\n"
             "exponential for GD matched to it. Intervals are 95% two-stage bootstrap over\n"
             "seeds and prompts; a control (the random-init twin) traced alike says what a\n"
             "network that learned nothing matches.",
             "iclprobe trace -c checkpoints/d4_l8_h64.h5 --control checkpoints/d4_l8_h64_init.h5 "
             "--algorithms newton:16,gd:0.02:256 --prompts 2000 --out trace.h5"))
    return 0;
  FillTraceRequest(req, a, vm);
  CheckThreads(a.threads);
  const std::string csv =
      vm.count("csv") ? a.csv : std::filesystem::path(a.out).replace_extension(".csv").string();
  std::filesystem::path stem(csv);
  stem.replace_extension("");
  const std::string layers_csv = stem.string() + ".layers.csv",
                    rates_csv = stem.string() + ".rates.csv";
  const std::vector<std::string> inputs = InputPaths(t.specs(), vm);
  core::RequireDistinctOutputs(
      {{"out", a.out}, {"csv", csv}, {"csv", layers_csv}, {"csv", rates_csv}});
  const core::OutputOptions oo{vm.count("force") > 0, inputs, false, true};
  core::AtomicOutput h5out(a.out, "out", oo);
  core::AtomicOutput csvout(csv, "csv", oo), layersout(layers_csv, "csv", oo),
      ratesout(rates_csv, "csv", oo);
  CheckSeeds(a.checkpoints);
  std::vector<analysis::TraceInput> learners =
      LoadInputs(a.checkpoints, a.activations, "checkpoint");
  std::vector<analysis::TraceInput> controls =
      LoadInputs(a.controls, a.control_activations, "control");
  data::TaskConfig task = learners::ReadCheckpointInfo(a.checkpoints[0]).train.task;
  task.fixed_w = false;
  if (!a.activations.empty()) task = learners[0].info->task;
  if (vm.count("algorithms") == 0) req.algorithms = analysis::DefaultTraceAlgorithms(task);
  if (!a.activations.empty() && !vm["seed"].defaulted())
    std::cerr << "trace: the prompts are the --activations files' (seed " << learners[0].info->seed
              << "); --seed seeds the bootstrap only\n";
  const analysis::TracePrompts prompts = analysis::PrepareTrace(req, task, learners, controls);
  // Extract's forward pass on a pool of workers, torch and OpenBLAS serial in each: the states
  // of a trace from checkpoints equal those of its activations files bit for bit.
  req.threads = ResolveThreads(a.threads);
  SetSerialKernels();
  const auto t0 = std::chrono::steady_clock::now();
  const long long per_input = static_cast<long long>(prompts.eval.size() + 2 * prompts.fit.size());
  Progress progress("trace", per_input * static_cast<long long>(learners.size() + controls.size()),
                    vm.count("quiet") > 0, "prompts");
  core::ThreadPool pool(req.threads);
  const analysis::TraceResult result =
      analysis::RunTrace(req, prompts, std::move(learners), std::move(controls), pool,
                         [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  analysis::WriteTraceFile(h5out.temp_path(), result);
  std::ostringstream f, g, h;
  analysis::WriteTraceCsv(f, result);
  analysis::WriteTraceLayersCsv(g, result);
  analysis::WriteTraceRatesCsv(h, result);
  csvout.WriteText(f.str());
  layersout.WriteText(g.str());
  ratesout.WriteText(h.str());
  for (auto* o : {&h5out, &csvout, &layersout, &ratesout})
    o->Commit();
  analysis::PrintTraceSummary(std::cout, result);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {}, {}, {} and {} in {}\n", a.out, csv, layers_csv, rates_csv,
                           FormatDuration(secs));
  return 0;
}

}  // namespace icl::cli
