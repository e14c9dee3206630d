// iclprobe construct: a transformer whose weights are written from a RAW program, saved as an
// ordinary checkpoint with a /construction group saying which rows hold which quantity.
#include <fmt/format.h>

#include <iostream>

#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "construct/construct.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct ConstructArgs {
  std::string program = "gd", out;
  double alpha = 0.05;
  int d = 4, n = 12;
  std::uint64_t seed = 1, rotate = 0;
  construct::Disguise disguise;
  std::int64_t check_prompts = 10000;
};

void DeclareConstructOptions(OptionTable& t, ConstructArgs& a) {
  // clang-format off
  t.Value("program", &a.program, "program", "the RAW program: gd (one step of "
       "batch gradient descent from w0 = 0; prediction 2 alpha x^T X^T y), gd:K (K steps, "
       "K <= 16; compare with the learner gd:ALPHA:K) or newton:K:C[:LAMBDA] (K <= 20 "
       "Newton-Schulz steps Y <- Y (2I - A Y) on A = X^T X + LAMBDA I from Y_0 = C I, then "
       "w = Y X^T y; compare with the learners newton:K:C:LAMBDA and ridge:LAMBDA; it converges "
       "while C times the largest eigenvalue of A stays below 2)");
  t.Value("alpha", &a.alpha, "alpha", "gd: step size alpha (K steps track "
       "gd:ALPHA:K while 2 alpha times the largest eigenvalue of X^T X stays below 2)");
  t.Optional("rotate", &a.rotate, "rotate", "fold a random orthogonal change of basis "
       "(seeded by this value) into every weight: each hidden state becomes Q h, so no quantity "
       "sits on its own axes; /construction/rotation holds Q");
  t.Value("distractors", &a.disguise.distractors, "distractors", "extra residual rows of "
       "prompt features that nothing reads (random projections of the current token, their "
       "squares and products; at most 4 times the program's own width)");
  t.Value("context-distractors", &a.disguise.context_distractors, "context_distractors", "q: "
       "d^2 + 5q extra rows of features of the prompt's x's that nothing reads (x x^T of the "
       "token's example, q random projections u of its x, q random features v and s each of the "
       "mean of x x^T so far, and the products u v and v s), so that the state has many "
       "independent directions, as a trained learner's does; functions of X alone, so "
       "uncorrelated with X'y (at most 4 times the program's own width)");
  t.Optional("decoy", &a.disguise.decoy, "decoy", "xty: a second, unused encoding M X'y (M fixed, "
       "random, invertible) written at block 2 like X'y: decodable but not used");
  t.Value("nuisance", &a.disguise.nuisance, "nuisance", "sigma: X'y at block 2 carries + sigma "
       "(P x_k)^2, a nonlinear nuisance the next MLP removes exactly, so linear probes read X'y "
       "there less well while the computation is unchanged (0: none)");
  t.Value("decoy-noise", &a.disguise.decoy_noise, "decoy_noise", "sigma: the decoy "
       "carries + sigma (R x_k)^2 (R fixed, random, orthogonal), so it is no longer an exact copy "
       "of X'y across prompts; an exact copy cannot be told from the used one by interchange "
       "(0: exact)");
  t.Value("disguise-seed", &a.disguise.seed, "disguise.seed", "seed of the distractors', the "
       "decoy's and the nuisance's random maps");
  t.Value("check-prompts", &a.check_prompts, "check_prompts", "prompts of the task (x ~ N(0, "
       "I), seed 1) on which the (prompt, k) pairs outside the iteration's convergence region "
       "are counted and printed (0: skip)");
  t.Value("d", &a.d, "d", "input dimension d");
  t.Value("n", &a.n, "n", "examples per prompt the model reads (its n_max)");
  t.Switch("init-only", "write the program's architecture with random weights instead (seeded by "
       "--seed): the random-init control for probes of the construction");
  t.Value("seed", &a.seed, "seed", "seed of --init-only's weights");
  t.Optional("out,o", &a.out, "out", "checkpoint to write (required)");
  t.Switch("force", "overwrite an existing --out");
  // clang-format on
  t.Output("out");
}

}  // namespace

std::vector<OptionSpec> ConstructOptions() {
  return SpecsOf("construct", &DeclareConstructOptions);
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
  DeclareConstructOptions(t, a);
  po::options_description& opts = t.description();
  po::variables_map vm;
  if (!Parse(argc, argv, opts, vm,
             "Usage: iclprobe construct --program gd|gd:K|newton:K:C[:LAMBDA] [--alpha A]\n"
             "                          [--rotate SEED] --d D --n N --out FILE\n\n"
             "Writes a transformer whose weights compute a known algorithm (RAW operations,\n"
             "docs/paper.md), as an ordinary checkpoint that baselines, compare, extract, probe\n"
             "and report read unchanged. No LayerNorm (norm \"none\"), one head, zero biases.\n"
             "Layout of the hidden state (rows, in order): x [d], y [1], pos [2n] (one-hot\n"
             "position), count [1] (t+1), xprev [d], yx [d], mean_yx [d], xty [d], for gd:K\n"
             "also xx, mean_xx, xtx [d*d each, row-major], then w [d], pred [1].\n"
             "Block 1: mov x from the previous position; yx = y * xprev (gd:K: xx = xprev\n"
             "xprev^T). Block 2: mean over positions, times count: xty = X_k^T y_k at the y-token\n"
             "of example k (gd:K: xtx = X_k^T X_k); w = w_1 = 2 alpha xty. Blocks 3..K+1 (gd:K):\n"
             "w += 2 alpha (xty - xtx w), beside pred_t = x . w_t. Last block: pred = x . w_K,\n"
             "read out at the x-tokens. newton:K:C[:LAMBDA] adds inv [d*d] (Y_t), prod [d*d]\n"
             "(P_t = A Y_{t-1}): two blocks per step, w_t and pred_t one and two blocks after\n"
             "Y_t (2K + 4 blocks). Prompts outside an iteration's convergence region are not\n"
             "clamped; the command counts them on --check-prompts prompts.\n"
             "/construction in the file names each quantity's layer and rows.",
             "iclprobe construct --program newton:12:0.03:0.25 --d 4 --n 12 --out newton.h5"))
    return 0;
  if (out.empty()) throw std::invalid_argument("--out: required (the checkpoint to write)");
  // An empty --decoy (an unset shell variable) would build no decoy without a word.
  if (vm.count("decoy") && a.disguise.decoy.find_first_not_of(" \t") == std::string::npos)
    throw std::invalid_argument("--decoy: expected xty, got an empty value");
  const construct::Program parsed = construct::ParseProgram(program);
  if (parsed.kind != construct::Program::kGd && !vm["alpha"].defaulted())
    throw std::invalid_argument("--alpha: applies to the gd programs only, not to " + parsed.text);
  RequirePositive("alpha", alpha);
  RequirePositive("d", d);
  RequirePositive("n", n);
  if (a.check_prompts < 0)
    throw std::invalid_argument("--check-prompts: expected a count >= 0, got " +
                                std::to_string(a.check_prompts));
  construct::Construction c = construct::BuildProgram(parsed, d, n, alpha, a.disguise);
  if (vm.count("rotate")) c.rotation_seed = a.rotate;
  c.model.Validate();
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  if (vm.count("init-only")) {
    if (vm.count("rotate"))
      throw std::invalid_argument(
          "--rotate: a random-init model has no basis to rotate (its weights are already "
          "isotropic); leave --rotate out with --init-only");
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
  std::cout << fmt::format(
      "wrote {}: program {}{}{}, d={} n={}, {} blocks, H={}; ", out, c.program,
      parsed.kind == construct::Program::kGd ? fmt::format(" (alpha {:g})", alpha) : "",
      c.rotation_seed ? fmt::format(", rotated (seed {})", a.rotate) : "", d, n, c.model.layers,
      c.model.hidden);
  for (const auto& q : c.quantities)
    std::cout << fmt::format("{}{} after layer {}", &q == &c.quantities[0] ? "" : ", ", q.name,
                             q.layer);
  std::cout << "\n";
  if (a.check_prompts > 0 && c.steps > 1) {
    data::TaskConfig task;
    task.d = d;
    task.n = n;
    const auto count = construct::CountDivergent(c, task, /*seed=*/1, a.check_prompts);
    std::cout << fmt::format(
        "convergence: {} of {} (prompt, k) pairs ({} of {} prompts) of x ~ N(0, I) lie outside "
        "the iteration's convergence region (not clamped: their predictions are meaningless)\n",
        count.outside, count.pairs, count.prompts_outside, count.prompts);
  }
  return 0;
}

}  // namespace icl::cli
