// The excess-error curve over training budgets (learners/budget_curve.hpp).
#include "learners/budget_curve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/stats.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"

namespace icl::learners {

std::string ShorterBudgetMismatch(const CheckpointInfo& longest, const CheckpointInfo& shorter) {
  const std::string recipe =
      RecipeDifference(longest, shorter, {"shards", "save_every", "eval_every", "steps", "warmup"});
  if (!recipe.empty()) return recipe;
  const std::int64_t T = longest.train.steps, t = shorter.train.steps;
  std::int64_t factor = 0;
  if (t > 0 && t < T && T % t == 0) factor = T / t;
  if (factor < 2 || (factor & (factor - 1)) != 0)
    return fmt::format("train_config steps: {} is not T/2^j of T = {}", t, T);
  if (shorter.train.WarmupSteps() != longest.train.WarmupSteps() / factor)
    return fmt::format("train_config warmup: {} is not {} / {}", shorter.train.WarmupSteps(),
                       longest.train.WarmupSteps(), factor);
  return "";
}

namespace {

// Least squares of y on x: the slope, the intercept and the quantities its intervals need.
struct Line {
  double slope = 0, intercept = 0, x_mean = 0, sxx = 0, residual_var = arma::datum::nan;
};

Line FitLine(const arma::vec& x, const arma::vec& y) {
  Line l;
  l.x_mean = arma::mean(x);
  const arma::vec dx = x - l.x_mean;
  l.sxx = arma::dot(dx, dx);
  l.slope = arma::dot(dx, y - arma::mean(y)) / l.sxx;
  l.intercept = arma::mean(y) - l.slope * l.x_mean;
  if (x.n_elem > 2) {
    const arma::vec r = y - (l.intercept + l.slope * x);
    l.residual_var = arma::dot(r, r) / static_cast<double>(x.n_elem - 2);
  }
  return l;
}

// The variance of a linear combination sum_j c_j log e_j from each point's sampling error.
double SamplingVariance(const arma::vec& c, const arma::vec& log_se) {
  return arma::accu(arma::square(c % log_se));
}

}  // namespace

BudgetCurve FitBudgetCurve(const std::vector<std::int64_t>& steps, const arma::mat& excess) {
  const std::size_t m = steps.size();
  if (m < 2) throw std::invalid_argument("a budget curve needs two or more budgets");
  if (excess.n_rows != m || excess.n_cols < 2)
    throw std::invalid_argument(
        fmt::format("a budget curve needs {} rows of per-prompt excess over two or more prompts, "
                    "got {} x {}",
                    m, excess.n_rows, excess.n_cols));
  for (std::size_t j = 1; j < m; ++j)
    if (steps[j] <= steps[j - 1] || steps[j - 1] <= 0)
      throw std::invalid_argument("a budget curve's steps must be positive and ascend");

  BudgetCurve c;
  const double N = static_cast<double>(excess.n_cols);
  const double z = 1.96;
  arma::vec x(m), y(m), log_se(m);
  for (std::size_t j = 0; j < m; ++j) {
    const arma::rowvec e = excess.row(j);
    const double mean = arma::mean(e), se = arma::stddev(e) / std::sqrt(N);
    c.points.push_back({steps[j], "", mean, mean - z * se, mean + z * se});
    x(j) = std::log(static_cast<double>(steps[j]));
    y(j) = std::log(mean);
    log_se(j) = se / mean;
    if (j == 0) continue;
    const arma::rowvec diff = e - excess.row(j - 1);
    const double dm = arma::mean(diff), dse = arma::stddev(diff) / std::sqrt(N);
    c.change.push_back(dm);
    c.change_lo.push_back(dm - z * dse);
    c.change_hi.push_back(dm + z * dse);
    c.falls.push_back(dm + z * dse < 0);
    if (!c.falls.back() && !c.plateau) c.plateau = true, c.plateau_at = steps[j];
  }
  if (c.plateau || !(c.points.front().excess > 0) || !(c.points.back().excess > 0)) {
    c.plateau = true;
    if (c.plateau_at == 0) c.plateau_at = steps.back();
    return c;
  }

  const Line l = FitLine(x, y);
  c.b = -l.slope;
  c.a = std::exp(l.intercept);
  const double x4 = std::log(4.0 * static_cast<double>(steps.back()));
  c.at_4t = std::exp(l.intercept + l.slope * x4);
  if (m < 3) return c;  // no degree of freedom left for an interval
  const double t = core::StudentT975(static_cast<int>(m) - 2);
  const arma::vec dx = x - l.x_mean;
  // b = -sum_j (dx_j / Sxx) log e_j; the prediction at x4 = sum_j (1/m + (x4 - x̄) dx_j / Sxx) log
  // e_j.
  const arma::vec cb = dx / l.sxx;
  const arma::vec c4 = 1.0 / static_cast<double>(m) + (x4 - l.x_mean) * dx / l.sxx;
  const double var_b = l.residual_var / l.sxx + SamplingVariance(cb, log_se);
  const double var_4 =
      l.residual_var * (1.0 / static_cast<double>(m) + (x4 - l.x_mean) * (x4 - l.x_mean) / l.sxx) +
      SamplingVariance(c4, log_se);
  c.b_lo = c.b - t * std::sqrt(var_b), c.b_hi = c.b + t * std::sqrt(var_b);
  const double log4 = l.intercept + l.slope * x4;
  c.at_4t_lo = std::exp(log4 - t * std::sqrt(var_4));
  c.at_4t_hi = std::exp(log4 + t * std::sqrt(var_4));
  return c;
}

namespace {

// Orders the runs by steps, the longest last, and checks each shorter one against it.
std::vector<CheckpointInfo> CheckBudgets(std::vector<CheckpointInfo> runs) {
  if (runs.size() < 2)
    throw core::InputError("budgets", "",
                           "a budget curve needs two or more runs of one recipe and seed");
  std::sort(runs.begin(), runs.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.train.steps < b.train.steps;
  });
  const CheckpointInfo& longest = runs.back();
  for (std::size_t j = 0; j + 1 < runs.size(); ++j) {
    const std::string module = "checkpoint '" + runs[j].path + "'";
    if (runs[j].train.steps == runs[j + 1].train.steps)
      throw core::InputError(module, "",
                             fmt::format("has the budget of '{}' ({} steps); give each budget once",
                                         runs[j + 1].path, runs[j].train.steps));
    const std::string mismatch = ShorterBudgetMismatch(longest, runs[j]);
    if (!mismatch.empty())
      throw core::InputError(module, "",
                             "is not a shorter budget of the recipe and seed of '" + longest.path +
                                 "' (" + mismatch + ")");
  }
  for (const CheckpointInfo& r : runs)
    if (r.step != r.train.steps)
      throw core::InputError("checkpoint '" + r.path + "'", "",
                             fmt::format("is at step {} of {}; a budget curve compares finished "
                                         "runs",
                                         r.step, r.train.steps));
  return runs;
}

}  // namespace

BudgetCurve MeasureBudgetCurve(const std::vector<CheckpointInfo>& given,
                               const std::vector<int>& window) {
  const std::vector<CheckpointInfo> runs = CheckBudgets(given);
  const TrainConfig& tc = runs.back().train;
  const int n = tc.task.n, d = tc.task.d;
  if (window.empty())
    throw core::InputError("budgets", "budget_window", "leaves no k to average the excess over");
  for (int k : window)
    if (k < 0 || k >= n)
      throw core::InputError("budgets", "budget_window",
                             fmt::format("has k = {}, outside 0..{} of n = {}", k, n - 1, n));

  const data::PromptSet set = data::SamplePrompts(tc.task, tc.eval_seed, 0, tc.eval_prompts);
  const auto bayes = MakeLearner("bayes", tc.task);
  arma::mat bayes_pred(static_cast<arma::uword>(n), set.size());
  LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    RunOnPrompt(*bayes, set, i, run);
    bayes_pred.col(i) = run.predictions;
  }
  arma::uvec ks(window.size());
  for (std::size_t w = 0; w < window.size(); ++w)
    ks(w) = static_cast<arma::uword>(window[w]);

  std::vector<std::int64_t> steps;
  arma::mat excess(runs.size(), set.size());
  for (std::size_t j = 0; j < runs.size(); ++j) {
    Transformer model = LoadCheckpoint(runs[j].path);
    const arma::mat diff = TransformerPredictions(model, set) - bayes_pred;  // n x N
    excess.row(j) = arma::mean(arma::square(diff.rows(ks)), 0) / static_cast<double>(d);
    steps.push_back(runs[j].train.steps);
  }
  BudgetCurve c = FitBudgetCurve(steps, excess);
  for (std::size_t j = 0; j < runs.size(); ++j)
    c.points[j].path = runs[j].path;
  c.recipe = runs.back().path;
  c.window = window;
  c.prompts = tc.eval_prompts;
  c.prompt_seed = tc.eval_seed;
  return c;
}

std::vector<std::vector<CheckpointInfo>> GroupBudgets(const std::vector<CheckpointInfo>& compared,
                                                      const std::vector<CheckpointInfo>& budgets,
                                                      const std::string& field) {
  std::vector<std::vector<CheckpointInfo>> groups(compared.size());
  for (const CheckpointInfo& b : budgets) {
    std::size_t owner = compared.size();
    std::string why = "no run is compared";
    for (std::size_t j = 0; j < compared.size() && owner == compared.size(); ++j) {
      const std::string m = ShorterBudgetMismatch(compared[j], b);
      if (m.empty())
        owner = j;
      else if (j == 0)
        why = "'" + compared[j].path + "': " + m;
    }
    if (owner == compared.size())
      throw core::InputError("checkpoint '" + b.path + "'", field,
                             "is a shorter budget (T/2^j steps and warmup, the same recipe and "
                             "seed) of no compared run (" +
                                 why + ")");
    for (const CheckpointInfo& other : groups[owner])
      if (other.train.steps == b.train.steps)
        throw core::InputError(
            "checkpoint '" + b.path + "'", field,
            fmt::format("gives the {}-step budget of '{}', which '{}' gives already", b.train.steps,
                        compared[owner].path, other.path));
    groups[owner].push_back(b);
  }
  std::vector<std::vector<CheckpointInfo>> out;
  for (std::size_t j = 0; j < compared.size(); ++j) {
    if (groups[j].empty()) continue;
    std::sort(groups[j].begin(), groups[j].end(),
              [](const CheckpointInfo& a, const CheckpointInfo& b) {
                return a.train.steps < b.train.steps;
              });
    groups[j].push_back(compared[j]);
    out.push_back(std::move(groups[j]));
  }
  return out;
}

std::string BudgetCurveSummary(const BudgetCurve& c) {
  std::string steps;
  for (const BudgetPoint& p : c.points)
    steps += (steps.empty() ? "" : ", ") + std::to_string(p.steps);
  const std::string basis = fmt::format("budgets {} steps of one seed, {} prompts of seed {}",
                                        steps, c.prompts, c.prompt_seed);
  if (c.plateau) {
    const auto at = std::find_if(c.points.begin(), c.points.end(),
                                 [&](const BudgetPoint& p) { return p.steps == c.plateau_at; });
    const std::int64_t before = at == c.points.begin() ? c.plateau_at : (at - 1)->steps;
    return fmt::format(
        "no power law: plateau (the excess over Bayes does not fall from {} to {} steps) ({})",
        before, c.plateau_at, basis);
  }
  if (std::isnan(c.b_lo))
    return fmt::format(
        "excess over Bayes falls as T^-b, b = {:.2f} (no interval: two budgets; a third is "
        "missing); at 4T: {:.2e} ({})",
        c.b, c.at_4t, basis);
  return fmt::format(
      "excess over Bayes falls as T^-b, b = {:.2f} [{:.2f}, {:.2f}]; at 4T: {:.2e} [{:.2e}, "
      "{:.2e}] ({})",
      c.b, c.b_lo, c.b_hi, c.at_4t, c.at_4t_lo, c.at_4t_hi, basis);
}

void PrintBudgetCurve(std::ostream& os, const BudgetCurve& c) {
  os << fmt::format("excess error over the Bayes predictor by training budget: {}\n", c.recipe);
  os << fmt::format("  {:>8} {:>11} {:>24} {:>34}\n", "steps", "excess/d", "95%",
                    "change from the previous [95%]");
  for (std::size_t j = 0; j < c.points.size(); ++j) {
    const BudgetPoint& p = c.points[j];
    std::string change;
    if (j > 0)
      change = fmt::format("{:+.2e} [{:+.1e}, {:+.1e}] {}", c.change[j - 1], c.change_lo[j - 1],
                           c.change_hi[j - 1], c.falls[j - 1] ? "falls" : "DOES NOT FALL");
    os << fmt::format("  {:>8} {:>11.4e} [{:.3e}, {:.3e}] {:>34}\n", p.steps, p.excess, p.lo, p.hi,
                      change);
  }
  os << "  " << BudgetCurveSummary(c) << "\n";
}

void WriteBudgetCurveCsv(std::ostream& os, const std::vector<BudgetCurve>& curves) {
  os << "recipe,steps,checkpoint,excess,excess_lo,excess_hi,change,change_lo,change_hi,falls\n";
  for (const BudgetCurve& c : curves)
    for (std::size_t j = 0; j < c.points.size(); ++j) {
      const BudgetPoint& p = c.points[j];
      os << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g}", core::CsvField(c.recipe), p.steps,
                        core::CsvField(p.path), p.excess, p.lo, p.hi);
      if (j == 0)
        os << ",,,,\n";
      else
        os << fmt::format(",{:.9g},{:.9g},{:.9g},{}\n", c.change[j - 1], c.change_lo[j - 1],
                          c.change_hi[j - 1], c.falls[j - 1] ? 1 : 0);
    }
}

void WriteBudgetFitCsv(std::ostream& os, const std::vector<BudgetCurve>& curves) {
  os << "recipe,budgets,plateau,plateau_at,b,b_lo,b_hi,a,excess_at_4t,excess_at_4t_lo,"
        "excess_at_4t_hi\n";
  for (const BudgetCurve& c : curves)
    os << fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n",
                      core::CsvField(c.recipe), c.points.size(), c.plateau ? 1 : 0,
                      c.plateau ? std::to_string(c.plateau_at) : "", c.b, c.b_lo, c.b_hi, c.a,
                      c.at_4t, c.at_4t_lo, c.at_4t_hi);
}

}  // namespace icl::learners
