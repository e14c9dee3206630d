// iclprobe intervene: does the model use what a ridge probe reads? Interchange interventions
// along the probe's direction, per layer and k, with a random-direction control.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "analysis/intervene.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "data/output.hpp"
#include "data/sha256.hpp"
#include "learners/checkpoint.hpp"

namespace icl::cli {

int RunIntervene(int argc, char** argv) {
  std::string checkpoint, probes_path, out, csv, layers_text, ks_text, span = "probed",
                                                                       metric = "covariance";
  analysis::InterveneRequest req;
  int threads = 0;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("checkpoint,c", po::value(&checkpoint), "the learner (required): the checkpoint whose activations "
       "the probes were fitted on")
      ("probes", po::value(&probes_path), "probes.h5 from iclprobe probe with the ridge family (required)")
      ("target,t", po::value(&req.target)->default_value(req.target), "w_ols, w_ridge, w or xty")
      ("layers,l", po::value(&layers_text), "states to edit, e.g. 0,2,4 (default: every layer of the "
       "probes file)")
      ("k", po::value(&ks_text), "numbers of examples, e.g. 4,8 (each <= n-1: the query is x_{k+1}; "
       "default: every k of the probes file below n)")
      ("pairs", po::value(&req.pairs)->default_value(req.pairs), "prompt pairs (A, B): A's state is "
       "edited so that the probe reads B's value")
      ("seed", po::value(&req.seed)->default_value(req.seed), "seed of the pairs' prompts (pair p = "
       "prompts 2p, 2p+1) and of the random directions")
      ("span", po::value(&span)->default_value(span), "where the edit is added: probed (the state "
       "after k examples, the y-token of example k) or through-query (also the x-token of example "
       "k+1, where the prediction is read)")
      ("metric", po::value(&metric)->default_value(metric), "the norm in which the edit is "
       "smallest: covariance (of the states over --calibration-prompts prompts of their own stream: "
       "the edit moves the state the way states of real prompts vary) or standardized (the probe's "
       "feature scales only)")
      ("calibration-prompts", po::value(&req.calibration_prompts)->default_value(req.calibration_prompts),
       "prompts for the states' covariance (covariance metric)")
      ("response", po::value(&req.response), "how the algorithm's prediction responds to the "
       "quantity: weights (w targets: dy = x_q^T dw); for xty ols (default), ridge:LAMBDA or "
       "gd:ALPHA (dy = 2 ALPHA x_q^T d(X'y))")
      ("bootstrap", po::value(&req.bootstrap)->default_value(req.bootstrap), "bootstrap replicates "
       "over pairs for the slopes' 95% intervals")
      ("batch", po::value(&req.batch)->default_value(req.batch), "pairs per forward pass")
      ("out,o", po::value(&out), "interventions file (HDF5, required)")
      ("csv", po::value(&csv), "tidy CSV (default: the --out path with .csv)")
      ("force", "overwrite existing outputs")
      ("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(opts, &threads);
  po::variables_map vm;
  if (!Parse(argc, argv, opts, vm,
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
  if (checkpoint.empty()) throw std::invalid_argument("--checkpoint: required (a trained learner)");
  if (probes_path.empty())
    throw std::invalid_argument("--probes: required (a probes.h5 file with ridge probes)");
  if (out.empty()) throw std::invalid_argument("--out: required (the interventions file)");
  if (span != "probed" && span != "through-query")
    throw std::invalid_argument("--span: expected probed or through-query, got '" + span + "'");
  req.span = span == "probed" ? analysis::EditSpan::kProbed : analysis::EditSpan::kThroughQuery;
  if (metric != "covariance" && metric != "standardized")
    throw std::invalid_argument("--metric: expected covariance or standardized, got '" + metric +
                                "'");
  req.metric = metric == "covariance" ? analysis::EditMetric::kCovariance
                                      : analysis::EditMetric::kStandardized;
  if (req.calibration_prompts < 2 || req.calibration_prompts > 10000000)
    throw std::invalid_argument("--calibration-prompts: expected 2..10000000, got " +
                                std::to_string(req.calibration_prompts));
  if (vm.count("layers")) req.layers = ParseInts("--layers", layers_text);
  if (vm.count("k")) req.ks = ParseInts("--k", ks_text);
  if (req.pairs < 2 || req.pairs > 1000000)
    throw std::invalid_argument("--pairs: expected 2..1000000, got " + std::to_string(req.pairs));
  RequirePositive("bootstrap", req.bootstrap);
  RequirePositive("batch", req.batch);
  CheckThreads(threads);
  try {
    analysis::ParseResponse(req.target, req.response);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(vm.count("response") ? "--response" : "--target") +
                                ": " + e.what());
  }
  data::RequireRegularInput(checkpoint, "checkpoint");
  data::RequireRegularInput(probes_path, "probes");
  if (!vm.count("csv")) csv = std::filesystem::path(out).replace_extension(".csv").string();
  const std::vector<std::string> inputs = {checkpoint, probes_path};
  const bool force = vm.count("force") > 0;
  data::RequireDistinctOutputs({{"out", out}, {"csv", csv}});
  data::AtomicOutput h5out(out, "out", {force, inputs, false, true});
  data::AtomicOutput csvout(csv, "csv", {force, inputs, false, true});

  const probes::ProbeResults probes = probes::ReadProbesFile(probes_path);
  const std::string sha = data::Sha256File(checkpoint);
  learners::Transformer model = learners::LoadCheckpoint(checkpoint);
  SetThreads(threads);
  const long long layers = req.layers.empty() ? probes.layers.size() : req.layers.size();
  long long ks = req.ks.size();
  if (req.ks.empty())  // the default: every probed k that leaves a query
    for (const int k : probes.ks)
      ks += k < probes.n;
  Progress progress("intervene", static_cast<long long>(req.pairs) * layers * ks,
                    vm.count("quiet") > 0, "edits");
  const auto t0 = std::chrono::steady_clock::now();
  analysis::InterveneResult result = analysis::RunIntervene(
      model, sha, probes, req, [&](long long done, long long) { progress.Update(done); });
  progress.Finish();
  result.checkpoint = checkpoint;
  result.probes_digest = data::Sha256File(probes_path);
  analysis::WriteInterventionsFile(h5out.temp_path(), result);
  std::ostringstream f;
  analysis::WriteInterventionsCsv(f, result);
  csvout.WriteText(f.str());
  h5out.Commit();
  csvout.Commit();
  analysis::PrintInterventionSummary(std::cout, result);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {} and {} in {}\n", out, csv, FormatDuration(secs));
  return 0;
}

}  // namespace icl::cli
