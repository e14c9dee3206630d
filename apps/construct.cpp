// iclprobe construct: a transformer whose weights are written from a RAW program, saved as an
// ordinary checkpoint with a /construction group saying which rows hold which quantity.
#include <fmt/format.h>

#include <iostream>

#include "apps/cli.hpp"
#include "construct/construct.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct ConstructArgs {
  std::string program = "gd", out;
  double alpha = 0.05;
  int d = 4, n = 12;
  std::uint64_t seed = 1;
};

void DeclareOptions(OptionTable& t, ConstructArgs& a) {
  // clang-format off
  t.Value("program", &a.program, "program", "the RAW program: gd (one step of "
       "batch gradient descent from w0 = 0; prediction 2 alpha x^T X^T y) or gd:K (K steps, "
       "K <= 16; compare with the learner gd:ALPHA:K)");
  t.Value("alpha", &a.alpha, "alpha", "gd: step size alpha (K steps track "
       "gd:ALPHA:K while 2 alpha times the largest eigenvalue of X^T X stays below 2)");
  t.Value("d", &a.d, "d", "input dimension d");
  t.Value("n", &a.n, "n", "examples per prompt the model reads (its n_max)");
  t.Switch("init-only", "write the program's architecture with random weights instead (seeded by "
       "--seed): the random-init control for probes of the construction");
  t.Value("seed", &a.seed, "seed", "seed of --init-only's weights");
  t.Optional("out,o", &a.out, "out", "checkpoint to write (required)");
  t.Switch("force", "overwrite an existing --out");
  // clang-format on
}

}  // namespace

std::vector<OptionSpec> ConstructOptions() {
  return SpecsOf("construct", &DeclareOptions);
}

int RunConstruct(int argc, char** argv) {
  ConstructArgs a;
  auto& program = a.program;
  auto& out = a.out;
  auto& alpha = a.alpha;
  auto& d = a.d;
  auto& n = a.n;
  auto& seed = a.seed;
  OptionTable t("construct");
  DeclareOptions(t, a);
  po::options_description& opts = t.description();
  po::variables_map vm;
  if (!Parse(argc, argv, opts, vm,
             "Usage: iclprobe construct --program gd|gd:K --alpha A --d D --n N --out FILE\n\n"
             "Writes a transformer whose weights compute a known algorithm (PAPER.md, the RAW\n"
             "constructions), as an ordinary checkpoint that baselines, compare, extract, probe\n"
             "and report read unchanged. No LayerNorm (norm \"none\"), one head, zero biases.\n"
             "Layout of the hidden state (rows, in order): x [d], y [1], pos [2n] (one-hot\n"
             "position), count [1] (t+1), xprev [d], yx [d], mean_yx [d], xty [d], for gd:K\n"
             "also xx, mean_xx, xtx [d*d each, row-major], then w [d], pred [1].\n"
             "Block 1: mov x from the previous position; yx = y * xprev (gd:K: xx = xprev\n"
             "xprev^T). Block 2: mean over positions, times count: xty = X_k^T y_k at the y-token\n"
             "of example k (gd:K: xtx = X_k^T X_k); w = w_1 = 2 alpha xty. Blocks 3..K+1 (gd:K):\n"
             "w += 2 alpha (xty - xtx w). Last block: pred = x . w, read out at the x-tokens.\n"
             "/construction in the file names each quantity's layer and rows.",
             "iclprobe construct --program gd --alpha 0.05 --d 4 --n 12 --out gd.h5"))
    return 0;
  if (out.empty()) throw std::invalid_argument("--out: required (the checkpoint to write)");
  const int steps = construct::ParseGdSteps(program);
  RequirePositive("alpha", alpha);
  RequirePositive("d", d);
  RequirePositive("n", n);
  const construct::Construction c = construct::GdProgram(d, n, alpha, steps);
  c.model.Validate();
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  if (vm.count("init-only")) {
    learners::TrainConfig train;
    train.task.d = d;
    train.task.n = n;
    train.steps = 0;
    train.seed = seed;
    learners::WriteInitCheckpoint(c.model, train, out, so);
    std::cout << fmt::format(
        "wrote {}: the architecture of program {} with random weights (seed {})\n", out, c.program,
        seed);
    return 0;
  }
  construct::WriteConstruction(out, c, so);
  std::cout << fmt::format("wrote {}: program {} (alpha {:g}), d={} n={}, {} blocks, H={}; ", out,
                           c.program, alpha, d, n, c.model.layers, c.model.hidden);
  for (const auto& q : c.quantities)
    std::cout << fmt::format("{}{} after layer {}", &q == &c.quantities[0] ? "" : ", ", q.name,
                             q.layer);
  std::cout << "\n";
  return 0;
}

}  // namespace icl::cli
