// iclprobe intervene: does the model use what a ridge probe reads? Interchange interventions
// along the probe's direction, per layer and k, with a random-direction control.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "apps/checkpoint_command.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/errors.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"
#include "intervene/intervene.hpp"
#include "learners/checkpoint.hpp"

namespace icl::cli {

namespace {

// What the command line sets besides the request's own fields.
struct InterveneArgs {
  std::string checkpoint, probes_path, out, csv, layers_text, ks_text, within,
      span = "probed", metric = "covariance";
  int threads = 0;
};

void DeclareInterveneOptions(OptionTable& t, intervene::InterveneRequest& req, InterveneArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.checkpoint, "checkpoint", "the learner (required): the checkpoint whose activations "
       "the probes were fitted on");
  t.Optional("probes", &a.probes_path, "probes_path", "probes.h5 from iclprobe probe with the ridge family (required)");
  t.Value("target", &req.target, "req.target", "w_ols, w_ridge, w, xty, or a learner target "
       "w_<spec> of the activations (extract --learner-targets), a weight target");
  t.Optional("layers", &a.layers_text, "layers_text", "states to edit, e.g. 0,2,4 (default: every layer of the "
       "probes file)");
  t.Optional("k", &a.ks_text, "ks_text", "numbers of examples, e.g. 4,8 (each <= n-1: the query is x_{k+1}; "
       "default: every k of the probes file below n)");
  t.Value("pairs", &req.pairs, "req.pairs", "prompt pairs (A, B): A's state is "
       "edited so that the probe reads B's value");
  t.Value("seed", &req.seed, "req.seed", "seed of the pairs' prompts (pair p = "
       "prompts 2p, 2p+1) and of the random directions");
  t.Value("span", &a.span, "span", "where the edit is added: probed (the state "
       "after k examples, the y-token of example k) or through-query (also the x-token of example "
       "k+1, where the prediction is read)");
  t.Value("metric", &a.metric, "metric", "the norm in which the edit is "
       "smallest: covariance (of the states over --calibration-prompts prompts of their own stream: "
       "the edit moves the state the way states of real prompts vary) or standardized (the probe's "
       "feature scales only)");
  t.Value("calibration-prompts", &req.calibration_prompts, "req.calibration_prompts", "prompts for the states' covariance (covariance metric)");
  t.Optional("within", &a.within, "within", "a constructed checkpoint's quantity (inspect lists "
       "them, e.g. decoy_xty): fit the probe on the state's coordinates in that quantity's rows "
       "alone (least squares on the calibration prompts) and keep the edit inside them, instead "
       "of the probes file's probe of the whole state, which reads and edits every copy");
  t.Optional("response", &req.response, "req.response", "how the algorithm's prediction responds to the "
       "quantity: weights (w targets: dy = x_q^T dw); for xty ols (default), ridge:LAMBDA or "
       "gd:ALPHA (dy = 2 ALPHA x_q^T d(X'y))");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates "
       "over pairs for the slopes' 95% intervals");
  t.Value("batch", &req.batch, "req.batch", "pairs per forward pass");
  t.Optional("out,o", &a.out, "out", "interventions file (HDF5, required)");
  t.Optional("csv", &a.csv, "csv", "tidy CSV (default: the --out path with .csv)");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Input("probes").Output("out").Output("csv");
}

// The request from the options, checked before any file is opened.
void FillInterveneRequest(intervene::InterveneRequest& req, const InterveneArgs& a,
                          const po::variables_map& vm) {
  if (a.checkpoint.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  if (a.probes_path.empty())
    throw std::invalid_argument("--probes: required (a probes.h5 file with ridge probes)");
  if (a.out.empty()) throw std::invalid_argument("--out: required (the interventions file)");
  req.span = intervene::ParseEditSpan(a.span);
  req.metric = intervene::ParseEditMetric(a.metric);
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers_text);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks_text);
  req.Validate();
}

}  // namespace

std::vector<OptionSpec> InterveneOptions() {
  return SpecsOf("intervene", &DeclareInterveneOptions);
}

int RunIntervene(int argc, char** argv) {
  intervene::InterveneRequest req;
  InterveneArgs a;
  OptionTable t("intervene");
  DeclareInterveneOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe intervene --checkpoint FILE --probes FILE --out FILE [options]\n\n"
             "A probe shows that a layer carries a quantity; an intervention asks whether the\n"
             "model uses it. For each pair of prompts (A, B) and layer, A's state after k\n"
             "examples gets the edit that makes the ridge probe read B's value and is smallest\n"
             "in the states' own covariance (so it moves the state the way states of real\n"
             "prompts vary); the network runs on from that layer and the change of its\n"
             "prediction at A's next query x_q is compared with the change the algorithm\n"
             "predicts (weights: x_q^T dw). The slope of observed on predicted is 1 when the\n"
             "model responds as the algorithm would and 0 when it ignores the edit; an edit\n"
             "of the same norm in a random direction is the control.",
             "iclprobe intervene -c checkpoints/d4_l8_h64.h5 --probes probes.h5 --target w_ols "
             "--k 8 --pairs 1000 --out intervene.h5"))
    return 0;
  FillInterveneRequest(req, a, vm);
  CheckThreads(a.threads);
  const std::string& checkpoint = a.checkpoint;
  const std::string& probes_path = a.probes_path;
  const std::string& out = a.out;
  core::RequireRegularInput(checkpoint, "checkpoint");
  core::RequireRegularInput(probes_path, "probes");
  const std::string csv =
      vm.count("csv") ? a.csv : std::filesystem::path(out).replace_extension(".csv").string();
  const std::vector<std::string> inputs = InputPaths(t.specs(), vm);
  const bool force = vm.count("force") > 0;
  core::RequireDistinctOutputs({{"out", out}, {"csv", csv}});
  core::AtomicOutput h5out(out, "out", {force, inputs, false, true});
  core::AtomicOutput csvout(csv, "csv", {force, inputs, false, true});

  // The digest of the probes file read (the file is kept open while it is used): one replaced
  // during the run is refused below rather than recorded under the wrong digest.
  const std::string probes_digest = core::Sha256File(probes_path);
  const probes::ProbeResults probes = probes::ReadProbesFile(probes_path);
  const std::string sha = core::Sha256File(checkpoint);
  learners::Transformer model = learners::LoadCheckpoint(checkpoint);
  if (vm.count("within")) {
    std::string names;
    for (const auto& q : ConstructionSubspaces(checkpoint, model->config.hidden)) {
      names += (names.empty() ? "" : ", ") + q.name;
      if (q.name == a.within) req.within = q.basis;
    }
    if (req.within.empty())
      throw std::invalid_argument(
          "--within: '" + a.within + "' is not a quantity of '" + checkpoint + "' (" +
          (names.empty() ? std::string("it is not a construction") : "it has " + names) + ")");
    req.within_name = a.within;
    req.Validate();
  }
  SetThreads(a.threads);
  const long long layers = req.layers.empty() ? probes.layers.size() : req.layers.size();
  long long ks = req.ks.size();
  if (req.ks.empty())  // the default: every probed k that leaves a query
    for (const int k : probes.ks)
      ks += k < probes.n;
  Progress progress("intervene", static_cast<long long>(req.pairs) * layers * ks,
                    vm.count("quiet") > 0, "edits");
  const auto t0 = std::chrono::steady_clock::now();
  intervene::InterveneResult result = intervene::RunIntervene(
      model, sha, probes, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  result.checkpoint = checkpoint;
  if (core::Sha256File(probes_path) != probes_digest)
    throw std::runtime_error("'" + probes_path +
                             "' changed during the run; nothing was written; run again");
  result.probes_digest = probes_digest;
  intervene::WriteInterventionsFile(h5out.temp_path(), result);
  std::ostringstream f;
  intervene::WriteInterventionsCsv(f, result);
  csvout.WriteText(f.str());
  h5out.Commit();
  csvout.Commit();
  intervene::PrintInterventionSummary(std::cout, result);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {} and {} in {}\n", out, csv, FormatDuration(secs));
  return 0;
}

}  // namespace icl::cli
