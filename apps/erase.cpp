// iclprobe erase: concept erasure. A target is erased from a layer's states by the least-squares
// (LEACE) eraser, the network runs on, and the error per k is compared with the model's own, a
// random erasure of the same rank and the zero predictor's.
#include <fmt/format.h>

#include <iostream>

#include "apps/checkpoint_command.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/errors.hpp"
#include "intervene/erase.hpp"

namespace icl::cli {

namespace {

struct EraseArgs {
  std::string checkpoint, out, csv, layers_text, ks_text;
  int threads = 0;
};

void DeclareEraseOptions(OptionTable& t, intervene::EraseRequest& req, EraseArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.checkpoint, "checkpoint", "the learner (required); prompts are drawn from its task");
  t.Value("target", &req.target, "req.target", "what to erase: xty (X'y), w_ols or w_ridge (the task's Bayes ridge), "
       "the value after k examples");
  t.Optional("layers", &a.layers_text, "layers_text", "states to erase at, 0 (the embedding) .. L (default: all)");
  t.Optional("k", &a.ks_text, "ks_text", "numbers of examples, e.g. 2,4,8 (each <= n-1; default: 1..n-1)");
  t.Value("fit-prompts", &req.fit_prompts, "req.fit_prompts", "prompts the erasers are fitted on (stream --seed + 1)");
  t.Value("prompts,N", &req.prompts, "req.prompts", "test prompts (stream --seed)");
  t.Value("seed", &req.seed, "req.seed", "seed of the test prompts (the fit prompts use seed + 1) and of "
       "the random controls");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates over prompts for the 95% intervals");
  t.Value("batch", &req.batch, "req.batch", "prompts per forward pass");
  t.Optional("out,o", &a.out, "out", "erasure file (HDF5, required)");
  t.Optional("csv", &a.csv, "csv", "tidy CSV (default: the --out path with .csv)");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Output("out").Output("csv");
}

void FillEraseRequest(intervene::EraseRequest& req, const EraseArgs& a,
                      const po::variables_map& vm) {
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers_text);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks_text);
  req.Validate();
}

}  // namespace

std::vector<OptionSpec> EraseOptions() {
  return SpecsOf("erase", &DeclareEraseOptions);
}

int RunErase(int argc, char** argv) {
  intervene::EraseRequest req;
  EraseArgs a;
  OptionTable t("erase");
  DeclareEraseOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe erase --checkpoint FILE --out FILE [options]\n\n"
             "Does the model need what a layer carries linearly? For each layer and k the\n"
             "least-squares (LEACE) eraser of the target (fitted on --fit-prompts prompts) is\n"
             "applied to the states at the y-token of example k and at the query x_{k+1}: after\n"
             "it no affine readout of those states predicts the target better than its mean, and\n"
             "the states move as little as possible. The network runs on from the erased states;\n"
             "the error of its prediction of y_{k+1} is compared with the model's own, with the\n"
             "zero predictor's (what knowing nothing costs) and with erasing a random subspace\n"
             "of the same rank, with 95% bootstrap intervals over the test prompts.",
             "iclprobe erase -c checkpoints/d4_l8_h64.h5 --target xty --k 4,8 --out erase.h5"))
    return 0;
  FillEraseRequest(req, a, vm);
  RunCheckpointCommand(
      {"erase", a.checkpoint, a.out, a.csv, "the erasure file", a.threads,
       InputPaths(t.specs(), vm)},
      vm,
      [&](LoadedLearner& l, const std::string& h5_path, std::ostream& csv, std::ostream& summary) {
        const long long layers =
            req.layers.empty() ? l.model->config.layers + 1 : req.layers.size();
        const long long ks = req.ks.empty() ? l.info.train.task.n - 1 : req.ks.size();
        Progress progress("erase", static_cast<long long>(req.prompts) * layers * ks,
                          vm.count("quiet") > 0, "erasures");
        intervene::ErasureResult result =
            intervene::RunErase(l.model, l.sha256, l.info.train.task, req,
                                [&](long long done, long long) { progress.Update(done); });
        progress.Finish();
        result.checkpoint = a.checkpoint;
        intervene::WriteErasureFile(h5_path, result);
        intervene::WriteErasureCsv(csv, result);
        intervene::PrintErasureSummary(summary, result);
      });
  return 0;
}

}  // namespace icl::cli
