// iclprobe probe: layer-wise ridge, linear and MLP readouts of regression quantities from an
// activations file, with controls; writes probes.h5 and a tidy CSV.
#include <fmt/format.h>
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
#include "data/dist.hpp"
#include "data/output.hpp"
#include "data/sha256.hpp"
#include "probes/probes_file.hpp"
#include "probes/runner.hpp"

namespace icl::cli {

int RunProbe(int argc, char** argv) {
  probes::ProbeRequest req;
  std::string out, csv, targets = "w_ols,xty", families = "ridge", lambdas = "1e-3:1e5:20",
                        split = "0.8,0.1,0.1", pooling = "attention", layers, ks;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("activations,a", po::value(&req.activations), "activations file from iclprobe extract (required)")
      ("control", po::value(&req.controls)->composing(), "control activations file, probed the same way "
       "(repeatable): the random-init twin, the fixed-w control model")
      ("targets,t", po::value(&targets)->default_value(targets), "comma-separated datasets under /targets "
       "(w_ols, w_ridge, xty, xtx, w); xtx is probed as its upper triangle")
      ("probes", po::value(&families)->default_value(families), "comma-separated probe families: ridge, linear, mlp")
      ("seeds", po::value(&req.seeds)->default_value(req.seeds), "seeds (prompt splits and probe "
       "initialisations); report's intervals combine them with the test prompts")
      ("max-prompts", po::value(&req.max_prompts)->default_value(req.max_prompts), "probe only the "
       "first N prompts of every file (0: all), e.g. gradient probes on a part of a large file")
      ("bootstrap", po::value(&req.bootstrap)->default_value(req.bootstrap), "bootstrap replicates "
       "over test prompts for the 95% intervals (r2_lo, r2_hi, nmse_lo, nmse_hi); the per-prompt "
       "errors are kept in the file so report can pair and pool them")
      ("seed", po::value(&req.seed)->default_value(req.seed), "base seed")
      ("shuffle-control", "add a probe fit on targets permuted across training prompts (source 'shuffled')")
      ("lambdas", po::value(&lambdas)->default_value(lambdas), "ridge penalties: LO:HI:COUNT log-spaced, or a "
       "comma list; chosen by exact leave-one-out on the training split (features standardised)")
      ("split", po::value(&split)->default_value(split), "train,validation,test fractions (by prompt)")
      ("pooling", po::value(&pooling)->default_value(pooling), "linear/mlp input: attention (learned softmax "
       "weights over the states up to the one after k examples) or position (that state alone)")
      ("mlp-hidden", po::value(&req.gradient.mlp_hidden)->default_value(req.gradient.mlp_hidden), "MLP probe width")
      ("lr", po::value(&req.gradient.lr)->default_value(req.gradient.lr), "Adam learning rate of linear/mlp probes")
      ("epochs", po::value(&req.gradient.max_epochs)->default_value(req.gradient.max_epochs), "max epochs of "
       "linear/mlp probes (early stopping on the validation split)")
      ("patience", po::value(&req.gradient.patience)->default_value(req.gradient.patience), "epochs without "
       "validation improvement before stopping")
      ("batch", po::value(&req.gradient.batch)->default_value(req.gradient.batch), "minibatch of linear/mlp probes")
      ("layers", po::value(&layers), "only these layers (default: every stored layer)")
      ("k", po::value(&ks), "only these numbers of examples k (default: 1..n)")
      ("out,o", po::value(&out), "probes.h5 to write (required)")
      ("csv", po::value(&csv), "also write the tidy CSV (target,probe,source,layer,k,seed,mse,nmse,r2)")
      ("verify-inputs", "re-hash every row of the activations and control files against the "
       "digests extract recorded (reads them whole; by default only their attributes and row "
       "digests are checked against the content digest)")
      ("force", "overwrite existing outputs")
      ("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(opts, &req.threads);
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
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
  if (req.activations.empty())
    throw std::invalid_argument("--activations: required (a file from iclprobe extract)");
  if (out.empty()) throw std::invalid_argument("--out: required (the probes.h5 file to write)");
  req.targets = SplitList("--targets", targets);
  req.families = ParseFamilies(families);
  req.lambdas = ParseLambdas(lambdas);
  req.split = ParseSplit(split);
  if (pooling != "attention" && pooling != "position")
    throw std::invalid_argument("--pooling: expected attention or position, got '" + pooling + "'");
  req.pooled = pooling == "attention";
  if (vm.count("layers")) req.layers = ParseInts("--layers", layers);
  if (vm.count("k")) req.ks = ParseInts("--k", ks);
  req.shuffle_control = vm.count("shuffle-control") > 0;
  RequirePositive("mlp-hidden", req.gradient.mlp_hidden);
  RequirePositive("lr", req.gradient.lr);
  RequirePositive("epochs", req.gradient.max_epochs);
  RequirePositive("patience", req.gradient.patience);
  RequirePositive("batch", req.gradient.batch);
  CheckThreads(req.threads);
  const bool force = vm.count("force") > 0;
  data::RequireRegularInput(req.activations, "activations");
  std::vector<std::string> inputs = {req.activations};
  for (const auto& c : req.controls) {
    data::RequireRegularInput(c, "control");
    inputs.push_back(c);
  }
  data::RequireDistinctOutputs({{"out", out}, {"csv", csv}});
  // Under mpirun rank 0 holds the outputs, writes them and reports; every rank probes.
  const bool root = dist::IsRoot();
  std::unique_ptr<data::AtomicOutput> h5out, csvout;
  dist::OnRoot([&] {
    h5out = std::make_unique<data::AtomicOutput>(out, "out",
                                                 data::OutputOptions{force, inputs, false, true});
    if (vm.count("csv"))
      csvout = std::make_unique<data::AtomicOutput>(
          csv, "csv", data::OutputOptions{force, inputs, false, true});
  });
  dist::Together([&] { probes::ValidateRequest(req); });
  SetSerialKernels();  // the probes run in parallel over fits, each on one thread
  req.threads = ResolveThreads(req.threads);

  const long long units = (1 + req.controls.size() + req.shuffle_control) * req.layers.size() *
                          req.ks.size() * req.families.size();
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
  const auto result = probes::RunProbes(
      req, [&](double done, double) { progress.Update(static_cast<long long>(done + 1e-9)); });
  progress.Finish();
  dist::OnRoot([&] {
    probes::WriteProbesFile(h5out->temp_path(), req, result, hashes.get());
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

  // Summary: best layer per target, probe and source at the largest k probed (mean over seeds).
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
  for (const auto& t : req.targets)
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
        std::cout << fmt::format("  {:<8} {:<7} {:<22} layer {:>2}  R2 {:+.3f}\n", t,
                                 probes::FamilyName(fam), s, best_layer, best);
      }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {}{} ({} records) in {}\n", out, csvout ? " and " + csv : "",
                           result.records.size(), FormatDuration(secs));
  return 0;
}

}  // namespace icl::cli
