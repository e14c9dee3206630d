// iclprobe swap: whole-context counterfactuals. Prompt A's query runs on prompt B's context state
// at each layer, and the change of the prediction is compared with each algorithm's change on
// the prompt that stands for it (B's first k examples, then A's query).
#include <fmt/format.h>

#include <iostream>

#include "apps/checkpoint_command.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/errors.hpp"
#include "intervene/swap.hpp"

namespace icl::cli {

namespace {

struct SwapArgs {
  std::string checkpoint, out, csv, layers_text, ks_text;
  int threads = 0;
};

void DeclareSwapOptions(OptionTable& t, intervene::SwapRequest& req, SwapArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.checkpoint, "checkpoint", "the learner (required); pairs are drawn from its task");
  t.Value("learners", &req.learners, "req.learners", "classical learners to compare the model's change "
       "with, comma-separated specs as in compare (ols, ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], "
       "newton:STEPS[:C[:LAMBDA]], sgd:ALPHA, knn:K, zero); the model itself on the "
       "counterfactual prompt is always the first reference");
  t.Optional("layers", &a.layers_text, "layers_text", "states to swap the context at, 0 (the embedding) .. L "
       "(default: all)");
  t.Optional("k", &a.ks_text, "ks_text", "numbers of context examples swapped, e.g. 2,4,8 (each <= n-1: the "
       "query is x_{k+1}; default: 1..n-1)");
  t.Value("pairs", &req.pairs, "req.pairs", "prompt pairs (A, B): A's query runs on B's context");
  t.Value("seed", &req.seed, "req.seed", "seed of the pairs' prompts (pair p = prompts 2p, 2p+1)");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates over pairs for the 95% intervals");
  t.Value("batch", &req.batch, "req.batch", "pairs per forward pass");
  t.Optional("out,o", &a.out, "out", "swaps file (HDF5, required)");
  t.Optional("csv", &a.csv, "csv", "tidy CSV (default: the --out path with .csv)");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Output("out").Output("csv");
}

void FillSwapRequest(intervene::SwapRequest& req, const SwapArgs& a, const po::variables_map& vm) {
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers_text);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks_text);
  req.Validate();
}

}  // namespace

std::vector<OptionSpec> SwapOptions() {
  return SpecsOf("swap", &DeclareSwapOptions);
}

int RunSwap(int argc, char** argv) {
  intervene::SwapRequest req;
  SwapArgs a;
  OptionTable t("swap");
  DeclareSwapOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe swap --checkpoint FILE --out FILE [options]\n\n"
             "Does the model use its context the way an algorithm would, and up to which layer\n"
             "does the query still read it there? For each pair of prompts (A, B), layer l and\n"
             "k, A's states at its first k examples (positions 0..2k-1) are replaced by B's at\n"
             "layer l, the network runs on, and the change of the prediction at A's query\n"
             "x_{k+1} is compared with each algorithm's change on the prompt that swap stands\n"
             "for: B's first k examples, then A's query. At the embedding (l = 0) the swap is\n"
             "that prompt itself; once the query has read what it needs from the context, a swap\n"
             "changes nothing. 'reproduced' is the share of the algorithm's change the model\n"
             "reproduces (1: all of it, 0: none), 'slope' the model's change on the algorithm's;\n"
             "both per k and pooled over k, with 95% bootstrap intervals over pairs.",
             "iclprobe swap -c checkpoints/d4_l8_h64.h5 --learners ols,gd:0.1 --pairs 1000 "
             "--out swaps.h5"))
    return 0;
  FillSwapRequest(req, a, vm);
  RunCheckpointCommand(
      {"swap", a.checkpoint, a.out, a.csv, "the swaps file", a.threads, InputPaths(t.specs(), vm)},
      vm,
      [&](LoadedLearner& l, const std::string& h5_path, std::ostream& csv, std::ostream& summary) {
        const long long layers =
            req.layers.empty() ? l.model->config.layers + 1 : req.layers.size();
        const long long ks = req.ks.empty() ? l.info.train.task.n - 1 : req.ks.size();
        Progress progress("swap", static_cast<long long>(req.pairs) * layers * ks,
                          vm.count("quiet") > 0, "swaps");
        intervene::SwapResult result =
            intervene::RunSwap(l.model, l.sha256, l.info.train.task, req,
                               [&](long long done, long long) { progress.Update(done); });
        progress.Finish();
        result.checkpoint = a.checkpoint;
        intervene::WriteSwapsFile(h5_path, result);
        intervene::WriteSwapsCsv(csv, result);
        intervene::PrintSwapSummary(summary, result);
      });
  return 0;
}

}  // namespace icl::cli
