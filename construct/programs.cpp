// The programs the compiler knows (gd, gd:K, newton:K:C[:LAMBDA]): their layouts, ops and
// quantities, the grammar that names them, and the count of prompts outside their convergence.
#include <fmt/format.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "construct/construct.hpp"
#include "construct/programs_internal.hpp"
#include "core/errors.hpp"
#include "core/spec.hpp"
#include "learners/classical.hpp"

namespace icl::construct {

using detail::AddBlock1Disguise;
using detail::AddBlock2AttentionDisguise;
using detail::AddBlock2MlpDisguise;
using detail::AddDisguiseQuantities;
using detail::AddDisguiseRows;
using detail::AddNuisanceRemoval;

namespace {

void CheckShape(int d, int n_max) {
  if (d < 1) throw core::InputError("construct", "d", "must be positive");
  if (n_max < 1) throw core::InputError("construct", "n", "must be positive");
}

// Bounds on |a| + |b| of the products every program shares, for prompts of x ~ N(0, I),
// w ~ N(0, I): generous, so that products stay in the GELU's quadratic range (kMulReach in
// construct.cpp). |x_j| <= 6 covers every draw of N(0, 1) in 1e8 (P(|z| > 6) = 2e-9).
struct MomentRanges {
  double xy, mean, xx, mean_xx;
  MomentRanges(int d, int n_max)
      : xy(10.0 + 6.0 * std::sqrt(double(d))),
        mean(2.0 * n_max + xy),
        xx(12.0),
        mean_xx(2.0 * n_max + 36.0) {}
};

// Blocks 1 and 2 of every multi-step program: X^T y and X^T X at the y-token of example k and
// at the x-token of example k+1. xx = x x^T is formed at the x-tokens (the mov falls back to the
// position itself at t = 0, so xprev there is x_1, which must not enter X^T X); its mean times
// the count at the x-token of example k+1 includes that token's own x x^T, which block 2
// subtracts (zero at the y-tokens, where x = 0).
void AddMoments(Construction& c, int d) {
  Layout& L = c.layout;
  L.Add("xprev", d);        // x of the previous position: x_i at the y-token of example i
  L.Add("yx", d);           // y_i x_i at the y-token of example i, 0 at x-tokens
  L.Add("mean_yx", d);      // mean over positions <= t of yx
  L.Add("xty", d);          // X_k^T y_k
  L.Add("xx", d * d);       // x_i x_i^T (row-major) at the x-token of example i
  L.Add("mean_xx", d * d);  // its mean over positions <= t
  L.Add("xtx", d * d);      // X_k^T X_k
  const MomentRanges r(d, c.model.n_max);
  AddDisguiseRows(c, d);
  c.ops.push_back(Mov("x", "xprev", -1));
  c.ops.push_back(Mul("xprev", "y", "yx", 1, r.xy));
  c.ops.push_back(Parallel(Mul("x", "x", "xx", 1, r.xx, Op::kOuter)));
  AddBlock1Disguise(c, d);
  c.ops.push_back(Mean("yx", "mean_yx"));
  c.ops.push_back(Parallel(Mean("xx", "mean_xx")));
  AddBlock2AttentionDisguise(c, d);
  c.ops.push_back(Mul("mean_yx", "count", "xty", 1, r.mean));
  c.ops.push_back(Parallel(Mul("mean_xx", "count", "xtx", 1, r.mean_xx)));
  c.ops.push_back(Parallel(Mul("x", "x", "xtx", -1, r.xx, Op::kOuter)));
  AddBlock2MlpDisguise(c, r.mean);
}

void AddEmbeddingRows(Layout& L, int d, int n_max) {
  L.Add("x", d);            // x_i at its x-token (embedding)
  L.Add("y", 1);            // y_i at its y-token (embedding)
  L.Add("pos", 2 * n_max);  // one-hot position (embedding)
  L.Add("count", 1);        // t + 1, the number of positions up to t (embedding)
}

// Every iterate's prediction x_{k+1}^T w_t goes into the one row "pred", which the readout
// reads: each replaces the one before (an aff of -1 beside the product), so the state after the
// block that writes iterate t holds that iterate's prediction and no earlier one, and the
// model's own readout applied to that state (the "logit lens") reads it (the ground truth of
// tests/test_trace.cpp). Returns the ops that write iterate t's prediction (t = 1: into a zero
// row).
std::vector<Op> WritePrediction(int t, double range) {
  std::vector<Op> ops{Mul("x", "w", "pred", 1, range)};
  if (t >= 2) ops.push_back(Parallel(Aff("pred", "pred", -1)));
  return ops;
}

void AddMomentQuantities(Construction& c) {
  c.quantities = {
      {"x", 0, "x", "x-tokens", "x_i at the x-token of example i"},
      {"yx", 1, "yx", "y-tokens", "y_k x_k at the y-token of example k"},
      {"xty", 2, "xty", "y-tokens",
       "X_k^T y_k, the moment vector after k examples, at the y-token of example k (and at the "
       "next x-token)"},
  };
  if (c.steps > 1 || c.program != "gd")
    c.quantities.push_back({"xtx", 2, "xtx", "y-tokens",
                            "X_k^T X_k (row-major) at the y-token of example k (and at the next "
                            "x-token)"});
}

// The prediction of iterate t (of c.steps), written by block `layer`.
void AddPredictionQuantity(Construction& c, int t, int layer) {
  c.quantities.push_back({"pred_" + std::to_string(t), layer, "pred", "x-tokens",
                          fmt::format("x_{{k+1}}^T w_{}, the prediction of iterate {} at the "
                                      "x-token of example k+1",
                                      t, t),
                          t == c.steps ? -1 : layer});
}

// The final prediction (what the readout reads) and the disguise's quantities.
void AddFinalQuantities(Construction& c) {
  c.quantities.push_back({"pred", c.model.layers, "pred", "x-tokens",
                          fmt::format("x_{{k+1}}^T w_{}, the prediction at the x-token of "
                                      "example k+1",
                                      c.steps)});
  AddDisguiseQuantities(c);
}

Construction OneStepGd(int d, int n_max, double alpha, const Disguise& disguise) {
  Construction c;
  c.disguise = disguise;
  c.program = "gd";
  c.alpha = alpha;
  c.steps = 1;
  Layout& L = c.layout;
  AddEmbeddingRows(L, d, n_max);
  L.Add("xprev", d);
  L.Add("yx", d);
  L.Add("mean_yx", d);
  L.Add("xty", d);
  L.Add("pred", 1);  // the prediction at the x-token of example k+1
  AddDisguiseRows(c, d);
  const MomentRanges r(d, n_max);
  const double pred1_range = 10.0 + r.xy * n_max;
  c.ops.push_back(Mov("x", "xprev", -1));
  c.ops.push_back(Mul("xprev", "y", "yx", 1, r.xy));
  AddBlock1Disguise(c, d);
  c.ops.push_back(Mean("yx", "mean_yx"));
  AddBlock2AttentionDisguise(c, d);
  c.ops.push_back(Mul("mean_yx", "count", "xty", 1, r.mean));
  AddBlock2MlpDisguise(c, r.mean);
  AddNuisanceRemoval(c, /*own_block=*/true);
  // The prediction 2 alpha x^T X^T y straight from xty (w_1 = 2 alpha X^T y).
  c.ops.push_back(Mul("x", "xty", "pred", 2.0 * alpha, pred1_range));
  Assemble(c, d, n_max);
  AddMomentQuantities(c);
  AddDisguiseQuantities(c);
  c.quantities.push_back({"pred", c.model.layers, "pred", "x-tokens",
                          "2 alpha x_{k+1}^T X_k^T y_k, one GD step's prediction, at the x-token "
                          "of example k+1"});
  return c;
}

}  // namespace

Program ParseProgram(const std::string& program) {
  const core::Spec p = core::ParseSpec(program);
  Program out;
  if (p.name == "gd" && p.text == program) {
    const auto steps = p.args.empty() ? std::optional<long long>(1) : p.Integer(0, 1, kMaxGdSteps);
    if (p.args.size() <= 1 && steps) {
      out.kind = Program::kGd;
      out.steps = static_cast<int>(*steps);
      out.text = out.steps == 1 ? "gd" : "gd:" + std::to_string(out.steps);
      return out;
    }
    throw core::InputError("construct", "program",
                           fmt::format("expected gd or gd:K with K an integer in 1..{} (GD steps), "
                                       "got '{}'",
                                       kMaxGdSteps, program));
  }
  if (p.name == "newton" && p.text == program) {
    const std::string form = fmt::format(
        "expected newton:K:C or newton:K:C:LAMBDA with K an integer in 1..{} (Newton-Schulz "
        "steps), C > 0 (the start Y_0 = C I) and LAMBDA >= 0 (A = X^T X + LAMBDA I), e.g. "
        "newton:12:0.03:0.25; got '{}'",
        kMaxNewtonSteps, program);
    if (p.args.size() < 2 || p.args.size() > 3)
      throw core::InputError("construct", "program", form);
    const auto steps = p.Integer(0, 1, kMaxNewtonSteps);
    const auto start = p.Number(1);
    const auto lambda = p.args.size() == 3 ? p.Number(2) : std::optional<double>(0.0);
    if (!steps || !start || !lambda || !(*start > 0) || !std::isfinite(*start) || !(*lambda >= 0) ||
        !std::isfinite(*lambda))
      throw core::InputError("construct", "program", form);
    out.kind = Program::kNewton;
    out.steps = static_cast<int>(*steps);
    out.start = *start;
    out.lambda = *lambda;
    out.text = fmt::format("newton:{}:{:g}", out.steps, out.start) +
               (out.lambda > 0 ? fmt::format(":{:g}", out.lambda) : "");
    return out;
  }
  throw core::InputError(
      "construct", "program",
      "unknown program '" + program +
          "': expected gd, gd:K or newton:K:C[:LAMBDA], e.g. newton:12:0.03:0.25");
}

Construction BuildProgram(const Program& program, int d, int n_max, double alpha,
                          const Disguise& disguise) {
  if (program.kind == Program::kNewton) {
    Construction c =
        NewtonProgram(d, n_max, program.steps, program.start, program.lambda, disguise);
    RequireFloat32Weights(c, "program", program.text);
    return c;
  }
  Construction c = GdProgram(d, n_max, alpha, program.steps, disguise);
  std::ostringstream shown;
  shown << alpha;
  RequireFloat32Weights(c, "alpha", shown.str());
  return c;
}

Construction GdProgram(int d, int n_max, double alpha, int steps, const Disguise& disguise) {
  CheckShape(d, n_max);
  if (!(alpha > 0) || !std::isfinite(alpha))
    throw core::InputError("construct", "alpha", "must be a positive number");
  if (steps < 1 || steps > kMaxGdSteps)
    throw core::InputError("construct", "program",
                           "steps must be in 1.." + std::to_string(kMaxGdSteps));
  if (steps == 1) return OneStepGd(d, n_max, alpha, disguise);
  Construction c;
  c.disguise = disguise;
  c.program = "gd:" + std::to_string(steps);
  c.alpha = alpha;
  c.steps = steps;
  c.model.n_max = n_max;
  Layout& L = c.layout;
  AddEmbeddingRows(L, d, n_max);
  AddMoments(c, d);
  L.Add("w", d);     // the GD iterate w_t, at the y-token of example k and the next x-token
  L.Add("pred", 1);  // x_{k+1}^T w_t at the x-token of example k+1, each t replacing the last
  const MomentRanges r(d, n_max);
  // Entries of X^T X are at most sum_i x_ij^2, a chi-square with <= n degrees of freedom, below
  // 5 n but for a 1e-8 fraction (and a product 3x past its range is still within 1.2e-3). GD
  // iterates stay within |1 - (1 - 2 alpha l)^t| / l of w_OLS's component per eigenvalue l,
  // which for 2 alpha l < 2 is at most twice its size, and never more than 2 alpha t |X^T y|
  // (below: |X^T y| <= n xy_range).
  const double w_range = 10.0 + std::min(2.0 * alpha * steps * n_max * r.xy, 50.0);
  const double matvec_range = 5.0 * n_max + w_range;
  const double pred_range = 10.0 + w_range;
  // w_1 = w_0 - 2 alpha (X^T X w_0 - X^T y) = 2 alpha X^T y, from block 2's mean and count. With
  // a nuisance, block 2 must hold no clean linear copy of X'y, so w_1 waits for block 3, where
  // it reads X'y + sigma u^2 and the same product times -2 alpha cancels the nuisance.
  const int shift = disguise.nuisance > 0 ? 1 : 0;
  if (shift == 0) {
    c.ops.push_back(Parallel(Mul("mean_yx", "count", "w", 2.0 * alpha, r.mean)));
  } else {
    c.ops.push_back(Aff("xty", "w", 2.0 * alpha));
    c.ops.push_back(Parallel(Mul("nuis_u", "nuis_u", "w", -2.0 * alpha * disguise.nuisance, 12.0)));
    AddNuisanceRemoval(c, /*own_block=*/false);
  }
  for (int t = 2; t <= steps; ++t) {
    // w_t = w_{t-1} + 2 alpha X^T y - 2 alpha X^T X w_{t-1}: aff and matvec mul in one MLP,
    // both reading w_{t-1} and adding into the rows w; beside them the prediction of w_{t-1}.
    c.ops.push_back(Aff("xty", "w", 2.0 * alpha));
    c.ops.push_back(Parallel(Mul("xtx", "w", "w", -2.0 * alpha, matvec_range, Op::kMatVec)));
    for (const Op& op : WritePrediction(t - 1, pred_range))
      c.ops.push_back(Parallel(op));
  }
  {
    const std::vector<Op> last = WritePrediction(steps, pred_range);
    c.ops.insert(c.ops.end(), last.begin(), last.end());
  }
  Assemble(c, d, n_max);
  AddMomentQuantities(c);
  for (int t = 1; t <= steps; ++t) {
    c.quantities.push_back({"w_" + std::to_string(t), t + 1 + shift, "w", "y-tokens",
                            fmt::format("the GD iterate w_{} on the first k examples, at the "
                                        "y-token of example k and the next x-token",
                                        t),
                            t == steps ? -1 : t + 1 + shift});
    AddPredictionQuantity(c, t, t + 2 + shift);
  }
  AddFinalQuantities(c);
  return c;
}

Construction NewtonProgram(int d, int n_max, int steps, double start, double lambda,
                           const Disguise& disguise) {
  CheckShape(d, n_max);
  if (steps < 1 || steps > kMaxNewtonSteps)
    throw core::InputError("construct", "program",
                           "Newton steps must be in 1.." + std::to_string(kMaxNewtonSteps));
  if (!(start > 0) || !std::isfinite(start))
    throw core::InputError("construct", "program", "the start C must be a positive number");
  if (!(lambda >= 0) || !std::isfinite(lambda))
    throw core::InputError("construct", "program", "lambda must be a number >= 0");
  Construction c;
  c.disguise = disguise;
  c.program = fmt::format("newton:{}:{:g}", steps, start) +
              (lambda > 0 ? fmt::format(":{:g}", lambda) : "");
  c.steps = steps;
  c.start = start;
  c.lambda = lambda;
  c.model.n_max = n_max;
  Layout& L = c.layout;
  AddEmbeddingRows(L, d, n_max);
  AddMoments(c, d);
  L.Add("inv", d * d);   // Y_t (row-major), the iterate of A^{-1}
  L.Add("prod", d * d);  // P_t = A Y_{t-1}
  L.Add("w", d);         // w_t = Y_t X^T y
  L.Add("pred", 1);      // x_{k+1}^T w_t, each t replacing the last
  const double inv_range = std::min(std::ldexp(start, steps), lambda > 0 ? 1.0 / lambda : 1e300);
  // Ranges of |a| + |b|: X^T X entries are below 3 n but for rare prompts (a product 2x past its
  // range errs by 4x the bound, 5e-4); |X^T y| below 3 n + 10 likewise; A Y_{t-1} has eigenvalues
  // in [0, 2) (convergent prompts); ridge weights below 10.
  const double xtx_range = 3.0 * n_max + 6.0, xty_range = 3.0 * n_max + 10.0;
  const double ay_range = xtx_range + inv_range, yp_range = inv_range + 2.0;
  const double yxty_range = inv_range + xty_range, pred_range = 20.0;
  std::vector<double> start_matrix(std::size_t(d) * d, 0.0);
  for (int i = 0; i < d; ++i)
    start_matrix[std::size_t(i) * d + i] = start;
  c.ops.push_back(Parallel(Constant("inv", start_matrix)));  // Y_0 = C I, in block 2
  for (int t = 1; t <= steps + 1; ++t) {
    // Block 2t+1: P_t = A Y_{t-1} = X^T X Y_{t-1} + lambda Y_{t-1}, replacing P_{t-1}; beside
    // it w_{t-1} = Y_{t-1} X^T y, replacing w_{t-2}.
    std::vector<Op> odd;
    if (t <= steps) {
      odd.push_back(Mul("xtx", "inv", "prod", 1, ay_range, Op::kMatMat));
      if (lambda > 0) odd.push_back(Aff("inv", "prod", lambda));
      if (t >= 2) odd.push_back(Aff("prod", "prod", -1));
      // Block 3 reads no X'y (w_1 comes at block 5): the nuisance goes here.
      if (t == 1 && disguise.nuisance > 0)
        odd.push_back(Mul("nuis_u", "nuis_u", "xty", -disguise.nuisance, 12.0));
    }
    if (t >= 2) {
      odd.push_back(Mul("inv", "xty", "w", 1, yxty_range, Op::kMatVec));
      if (t >= 3) odd.push_back(Aff("w", "w", -1));
    }
    // Block 2t+2: Y_t = 2 Y_{t-1} - Y_{t-1} P_t; beside it the prediction x^T w_{t-1}.
    std::vector<Op> even;
    if (t <= steps) {
      even.push_back(Aff("inv", "inv", 1));
      even.push_back(Mul("inv", "prod", "inv", -1, yp_range, Op::kMatMat));
    }
    if (t >= 2)
      for (const Op& op : WritePrediction(t - 1, pred_range))
        even.push_back(op);
    for (auto* ops : {&odd, &even})
      for (std::size_t i = 0; i < ops->size(); ++i)
        c.ops.push_back(i == 0 ? (*ops)[i] : Parallel((*ops)[i]));
  }
  Assemble(c, d, n_max);
  AddMomentQuantities(c);
  for (int t = 1; t <= steps; ++t) {
    c.quantities.push_back({"inv_" + std::to_string(t), 2 * t + 2, "inv", "y-tokens",
                            fmt::format("Y_{} (row-major), Newton-Schulz iterate {} of (X_k^T X_k "
                                        "+ lambda I)^-1",
                                        t, t),
                            t == steps ? -1 : 2 * t + 3});
    c.quantities.push_back({"w_" + std::to_string(t), 2 * t + 3, "w", "y-tokens",
                            fmt::format("w_{} = Y_{} X_k^T y_k on the first k examples, at the "
                                        "y-token of example k and the next x-token",
                                        t, t),
                            t == steps ? -1 : 2 * t + 4});
    AddPredictionQuantity(c, t, 2 * t + 4);
  }
  AddFinalQuantities(c);
  return c;
}

DivergenceCount CountDivergent(const Construction& c, const data::TaskConfig& task,
                               std::uint64_t seed, std::int64_t prompts) {
  DivergenceCount out;
  if (c.program == "gd") return out;
  const bool newton = c.program.rfind("newton", 0) == 0;
  const learners::NewtonLearner iteration(c.steps, c.start, c.lambda, c.program);
  const int d = task.d, n = task.n;
  for (std::int64_t i = 0; i < prompts; i += 1000) {
    const auto count = std::min<std::int64_t>(1000, prompts - i);
    const data::PromptSet set = data::SamplePrompts(task, seed, std::uint64_t(i), count);
    for (std::size_t p = 0; p < set.size(); ++p) {
      arma::mat xtx(d, d, arma::fill::zeros);
      bool any = false;
      for (int k = 0; k < n; ++k) {
        if (k > 0) xtx += set.x.slice(p).col(k - 1) * set.x.slice(p).col(k - 1).t();
        const bool outside = newton ? iteration.Diverges(xtx)
                                    : k > 0 && 2.0 * c.alpha * arma::eig_sym(xtx).max() >= 2.0;
        out.outside += outside;
        any = any || outside;
      }
      out.pairs += n;
      out.prompts_outside += any;
    }
    out.prompts += count;
  }
  return out;
}

}  // namespace icl::construct
