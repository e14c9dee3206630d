// iclprobe das: distributed alignment search. A subspace of a layer's state is learned so that
// interchanging it from prompt B into prompt A makes the model output what an algorithm says
// B's value of a quantity (its weights, or X'y) would; scored by held-out IIA.
#include <fmt/format.h>

#include <iostream>

#include "apps/checkpoint_command.hpp"
#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "intervene/das.hpp"

namespace icl::cli {

namespace {

struct DasArgs {
  std::string checkpoint, out, csv, layers_text, ms_text, ks_text, position = "query",
                                                                   start = "probe";
  int threads = 0;
};

void DeclareDasOptions(OptionTable& t, intervene::DasRequest& req, DasArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.checkpoint, "checkpoint", "the learner (required); pairs are drawn from its task");
  t.Value("quantity", &req.quantity, "req.quantity", "what B gives A: w (A's query with B's weights) or xty "
       "(B's X'y with A's X'X)");
  t.Value("algorithm", &req.algorithm, "req.algorithm", "the algorithm that says what the quantity does: for w "
       "any linear learner spec (ols, ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], newton:..., sgd:ALPHA); "
       "for xty ols (k >= d + 2), ridge:LAMBDA, bayes or gd:ALPHA[:STEPS]");
  t.Value("position", &a.position, "position", "where the subspace is interchanged: query (the x-token of "
       "example k+1), y-token (of example k) or context (every position before the query)");
  t.Value("start", &a.start, "start", "where the search starts: probe (the ridge probe's directions of the "
       "quantity; the angle to the probe then measures the distance travelled) or random (a random "
       "rotation; on the rotated gd construction random starts end in poor local optima)");
  t.Optional("layers", &a.layers_text, "layers_text", "states to learn a subspace at, 0 (the embedding) .. L "
       "(default: all)");
  t.Optional("m", &a.ms_text, "ms_text", "subspace sizes, e.g. 1,2,4,8 (each <= the width H; default: 1, 2, "
       "d/2, d, 2d)");
  t.Optional("k", &a.ks_text, "ks_text", "numbers of examples, e.g. 6,8,10 (default: every k the "
       "counterfactual is defined at)");
  t.Value("train-pairs", &req.train_pairs, "req.train_pairs", "pairs the subspace is learned on (stream --seed)");
  t.Value("test-pairs", &req.test_pairs, "req.test_pairs", "held-out pairs it is scored on (stream --seed + 1)");
  t.Value("seed", &req.seed, "req.seed", "seed of the pairs (pair p = prompts 2p, 2p+1), the starts and the "
       "random subspaces");
  t.Value("epochs", &req.max_epochs, "req.max_epochs", "at most this many epochs per subspace");
  t.Value("tolerance", &req.tolerance, "req.tolerance", "stop when the held-out IIA gains less than this over "
       "an epoch");
  t.Value("lr", &req.learning_rate, "req.learning_rate", "Adam's learning rate on the rotation's generator");
  t.Value("batch", &req.batch, "req.batch", "pairs per step");
  t.Value("bootstrap", &req.bootstrap, "req.bootstrap", "bootstrap replicates over held-out pairs for the 95% "
       "intervals");
  t.Optional("out,o", &a.out, "out", "DAS file (HDF5, required)");
  t.Optional("csv", &a.csv, "csv", "tidy CSV (default: the --out path with .csv)");
  t.Switch("force", "overwrite existing outputs");
  t.Switch("quiet,q", "no progress lines");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Output("out").Output("csv");
}

void FillDasRequest(intervene::DasRequest& req, const DasArgs& a, const po::variables_map& vm) {
  req.position = intervene::ParseDasPosition(a.position);
  req.start = intervene::ParseDasStart(a.start);
  if (vm.count("layers")) req.layers = ParseInts("--layers", a.layers_text);
  if (vm.count("m")) req.ms = ParseInts("--m", a.ms_text);
  if (vm.count("k")) req.ks = ParseInts("--k", a.ks_text);
  req.Validate();
}

}  // namespace

std::vector<OptionSpec> DasOptions() {
  return SpecsOf("das", &DeclareDasOptions);
}

int RunDas(int argc, char** argv) {
  intervene::DasRequest req;
  DasArgs a;
  OptionTable t("das");
  DeclareDasOptions(t, req, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe das --checkpoint FILE --out FILE [options]\n\n"
             "Is there a subspace of a layer's state that carries what an algorithm says the\n"
             "model uses? Distributed alignment search learns, per layer and size m, an\n"
             "m-dimensional subspace (the first m columns of an orthogonal map exp(S - S') R0)\n"
             "such that replacing A's state in it by B's, at the chosen positions, makes the\n"
             "model output what the algorithm gives with B's quantity and A's everything else:\n"
             "with --quantity w, A's query with B's weights; with xty, A's X'X and B's X'y.\n"
             "Scored on held-out pairs by interchange-intervention accuracy (IIA, an R2 of the\n"
             "model's counterfactual output against the algorithm's, pooled over k) with 95%\n"
             "bootstrap intervals, against a random subspace of the same m, no interchange and\n"
             "the whole state; the learned subspaces are saved, with their principal angles to\n"
             "the ridge probe's directions (and to a construction's quantities).",
             "iclprobe das -c checkpoints/d4_l8_h64.h5 --quantity w --algorithm ols --layers 4 "
             "--m 1,2,4 --out das.h5"))
    return 0;
  FillDasRequest(req, a, vm);
  RunCheckpointCommand(
      {"das", a.checkpoint, a.out, a.csv, "the DAS file", a.threads, InputPaths(t.specs(), vm)}, vm,
      [&](LoadedLearner& l, const std::string& h5_path, std::ostream& csv, std::ostream& summary) {
        req.subspaces = ConstructionSubspaces(a.checkpoint, l.model->config.hidden);
        const bool quiet = vm.count("quiet") > 0;
        intervene::DasResult result =
            intervene::RunDas(l.model, l.sha256, l.info.train.task, req, [&](const std::string& s) {
              if (!quiet) std::cerr << "das: " << s << "\n";
            });
        result.checkpoint = a.checkpoint;
        intervene::WriteDasFile(h5_path, result);
        intervene::WriteDasCsv(csv, result);
        intervene::PrintDasSummary(summary, result);
      });
  return 0;
}

}  // namespace icl::cli
