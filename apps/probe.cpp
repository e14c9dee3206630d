// iclprobe probe: layer-wise ridge, linear and MLP readouts of regression quantities from an
// activations file, with controls; writes probes.h5 and a tidy CSV.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/dist.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"
#include "probes/probes_file.hpp"
#include "probes/runner.hpp"

namespace icl::cli {

namespace {

// What the command line sets besides the request's own fields.
struct ProbeArgs {
  std::string out, csv,
      targets = "w_ols,xty", families = "ridge", lambdas = probes::kDefaultLambdaGrid,
      split = "0.8,0.1,0.1", pooling = "attention", at = "state", layers, ks,
      code_blocks = fmt::format("{}", fmt::join(probes::DefaultCodelengthFractions(), ","));
  int threads = 0;
};

void DeclareProbeOptions(OptionTable& t, probes::ProbeRequest& req, ProbeArgs& a) {
  // clang-format off
  t.Optional("activations,a", &req.activations, "req.activations", "activations file from iclprobe extract (required)");
  t.List("control", &req.controls, "req.controls", "control activations file, probed the same way "
       "(repeatable): the random-init twin, the fixed-w control model");
  t.Value("targets,t", &a.targets, "targets", "comma-separated datasets under /targets "
       "(w_ols, w_ridge, xty, xtx, w); xtx is probed as its upper triangle");
  t.Value("probes", &a.families, "families", "comma-separated probe families: ridge, linear, mlp");
  t.Value("seeds", &req.seeds, "req.seeds", "seeds (prompt splits and probe "
       "initialisations); report's intervals combine them with the test prompts");
  t.Value("max-prompts", &req.max_prompts, "req.max_prompts", "probe only the "
       "first N prompts of every file (0: all), e.g. gradient probes on a part of a large file");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates "
       "over test prompts for the 95% intervals (r2_lo, r2_hi, nmse_lo, nmse_hi); the per-prompt "
       "errors are kept in the file so report can pair and pool them");
  t.Value("seed", &req.seed, "req.seed", "base seed");
  t.Switch("shuffle-control", "add a probe fit on targets permuted across training prompts (source 'shuffled')");
  t.Value("lambdas", &a.lambdas, "lambdas", "ridge penalties: LO:HI:COUNT log-spaced, or a "
       "comma list; chosen by exact leave-one-out on the training split (features standardised)");
  t.Value("split", &a.split, "split", "train,validation,test fractions (by prompt)");
  t.Switch("codelength", "also the online codelength (MDL, Voita & Titov 2020) of every "
       "probe: the training prompts cut into blocks, each block's targets coded by the probe "
       "fitted on the blocks before it (ridge: the Bayesian ridge predictive, no extra pass; "
       "linear/mlp: refitted per block, a Gaussian of its validation error, about one probe "
       "fit per block); bits, the reference code's bits and each block's bits go to "
       "/codelength and the CSV");
  t.Value("codelength-blocks", &a.code_blocks, "code_blocks", "with --codelength: where the "
       "blocks end, as increasing fractions of the training prompts ending at 1 (the first "
       "block, sent by the reference code, needs 2 prompts)");
  t.Value("pooling", &a.pooling, "pooling", "linear/mlp input: attention (learned softmax "
       "weights over the states up to the one after k examples) or position (that state alone)");
  t.Value("at", &a.at, "at", "where each probe reads: state (the y-token of example k), query "
       "(the x-token of example k+1, where the prediction of y_{k+1} is read; needs files "
       "extracted with positions all, and k < n: the default k becomes 1..n-1) or both; a target "
       "read at the query is stored as TARGET.query");
  t.Value("mlp-hidden", &req.gradient.mlp_hidden, "req.gradient.mlp_hidden", "MLP probe width (hidden units, 1..65536)");
  t.Value("lr", &req.gradient.lr, "req.gradient.lr", "Adam learning rate of linear/mlp probes");
  t.Value("epochs", &req.gradient.max_epochs, "req.gradient.max_epochs", "max epochs of "
       "linear/mlp probes (early stopping on the validation split)");
  t.Value("patience", &req.gradient.patience, "req.gradient.patience", "epochs without "
       "validation improvement before stopping");
  t.Value("batch", &req.gradient.batch, "req.gradient.batch", "minibatch of linear/mlp probes");
  t.Optional("layers", &a.layers, "layers", "only these layers (default: every stored layer)");
  t.Optional("k", &a.ks, "ks", "only these numbers of examples k (default: 1..n)");
  t.Optional("out,o", &a.out, "out", "probes.h5 to write (required)");
  t.Optional("csv", &a.csv, "csv", "also write the tidy CSV (target,probe,source,layer,k,seed,mse,nmse,r2)");
  t.Switch("verify-inputs", "re-hash every row of the activations and control files against the "
       "digests extract recorded (reads them whole; by default only their attributes and row "
       "digests are checked against the content digest)");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("activations").Input("control").Output("out").Output("csv");
}

// Best layer per target, probe and source at the largest k probed (mean over seeds).
void PrintBestLayers(const probes::ProbeRequest& req, const probes::ProbeOutput& result) {
  const int k = result.ks.back();
  std::map<std::tuple<std::string, std::string, std::string, int>, std::pair<double, int>>
      mean;  // sum, count
  for (const auto& r : result.records)
    if (r.k == k) {
      auto& m = mean[{r.target, r.probe, r.source, r.layer}];
      m.first += r.r2;
      m.second += 1;
    }
  std::cout << fmt::format("probe: best layer by test R2 at k={} (mean over {} seed(s)):\n", k,
                           result.seeds);
  std::vector<std::string> names;
  for (const auto& t : req.targets)
    for (auto at : req.at)
      names.push_back(at == probes::ProbeAt::kQuery ? probes::QueryTargetName(t) : t);
  for (const auto& t : names)
    for (auto fam : req.families)
      for (const auto& s : result.sources) {
        double best = -1e300;
        int best_layer = -1;
        for (int l : result.layers) {
          const auto it = mean.find({t, probes::FamilyName(fam), s, l});
          if (it == mean.end()) continue;
          const double v = it->second.first / it->second.second;
          if (v > best) best = v, best_layer = l;
        }
        std::cout << fmt::format("  {:<14} {:<7} {:<22} layer {:>2}  R2 {:+.3f}\n", t,
                                 probes::FamilyName(fam), s, best_layer, best);
      }
}

}  // namespace

std::vector<OptionSpec> ProbeOptions() {
  return SpecsOf("probe", &DeclareProbeOptions);
}

int RunProbe(int argc, char** argv) {
  probes::ProbeRequest req;
  ProbeArgs a;
  OptionTable t("probe");
  DeclareProbeOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(
          argc, argv, t.description(), vm,
          "Usage: iclprobe probe --activations FILE --out FILE [options]\n\n"
          "Fits readouts of regression quantities (targets) from the hidden state after k "
          "examples\n"
          "at every layer, on held-out prompts, and reports MSE, nMSE (1 = predicting the mean)\n"
          "and R2 per (target, probe, source, layer, k, seed), with controls.",
          "iclprobe probe --activations acts.h5 --control acts_init.h5 --control acts_fixedw.h5 "
          "--targets w_ols,xty,xtx --probes ridge,linear,mlp --seeds 3 --out probes.h5 --csv "
          "probes.csv\n  mpirun -np 4 iclprobe probe ...   (ridge statistics summed over the "
          "processes, linear/MLP fits spread over them; the same results as one process)"))
    return 0;
  if (a.out.empty()) throw std::invalid_argument("--out: required (the probes.h5 file to write)");
  req.targets = SplitList("--targets", a.targets);
  req.families = probes::ParseFamilies(ListEntries("--probes", a.families));
  req.lambdas = probes::ParseLambdaGrid(a.lambdas);
  req.split = probes::SplitFractions(ParseNumbers("--split", a.split));
  req.pooled = probes::ParsePooling(a.pooling);
  req.at = probes::ParseProbeAt(a.at);
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks);
  req.shuffle_control = vm.count("shuffle-control") > 0;
  req.codelength = vm.count("codelength") > 0;
  if (!vm["codelength-blocks"].defaulted())
    req.codelength_fractions = ParseNumbers("--codelength-blocks", a.code_blocks);
  req.Validate();  // before any output is created; PlanProbes checks again for library callers
  CheckThreads(a.threads);
  const bool force = vm.count("force") > 0;
  core::RequireRegularInput(req.activations, "activations");
  for (const auto& c : req.controls)
    core::RequireRegularInput(c, "control");
  const std::vector<std::string> inputs = InputPaths(t.specs(), vm);
  core::RequireDistinctOutputs({{"out", a.out}, {"csv", a.csv}});
  // Under mpirun rank 0 holds the outputs, writes them and reports; every rank probes.
  const bool root = dist::IsRoot();
  std::unique_ptr<core::AtomicOutput> h5out, csvout;
  dist::OnRoot([&] {
    h5out = std::make_unique<core::AtomicOutput>(a.out, "out",
                                                 core::OutputOptions{force, inputs, false, true});
    if (vm.count("csv"))
      csvout = std::make_unique<core::AtomicOutput>(
          a.csv, "csv", core::OutputOptions{force, inputs, false, true});
  });
  probes::ProbePlan plan;
  dist::Together([&] { plan = probes::PlanProbes(req); });
  SetSerialKernels();  // the probes run in parallel over fits, each on one thread
  core::ThreadPool pool(ResolveThreads(a.threads));

  const long long units = (1 + req.controls.size() + req.shuffle_control) *
                          plan.request.layers.size() * plan.request.ks.size() * req.families.size();
  Progress progress("probe", units, vm.count("quiet") > 0 || !root, "(layer,k) fits");
  const auto t0 = std::chrono::steady_clock::now();
  // Record which inputs were probed on another thread while the probes run: extract's content
  // digest after a cheap check (or, with --verify-inputs, every row re-hashed), the whole-file
  // SHA-256 for files from before extract recorded one.
  const bool verify = vm.count("verify-inputs") > 0;
  auto hashes = std::async(root ? std::launch::async : std::launch::deferred, [&req, verify] {
    std::map<std::string, probes::InputRecord> h;
    h[req.activations] = probes::RecordInput(req.activations, verify);
    for (const auto& c : req.controls)
      h[c] = probes::RecordInput(c, verify);
    return h;
  });
  const auto result = probes::RunProbes(plan, pool, [&](double done, double) {
    progress.Update(static_cast<long long>(done + 1e-9));
  });
  progress.Finish();
  dist::OnRoot([&] {
    probes::WriteProbesFile(h5out->temp_path(), plan.request, result, hashes.get());
    if (csvout) {
      std::ostringstream f;
      probes::WriteProbesCsv(f, result);
      csvout->WriteText(f.str());
    }
    // Both outputs are complete and synced before either takes its final name.
    h5out->Commit();
    if (csvout) csvout->Commit();
  });
  if (!root) return 0;

  PrintBestLayers(req, result);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {}{} ({} records) in {}\n", a.out, csvout ? " and " + a.csv : "",
                           result.records.size(), FormatDuration(secs));
  return 0;
}

}  // namespace icl::cli
