// The fitted reference learners of compare (gd:fit, newton:fit, sgd:fit, ridge:fit, lasso:fit):
// their specs, and the search for the family member closest to a learner under test.
#include "analysis/compare_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "learners/trainer.hpp"

namespace icl::analysis {

std::string FitSpec::Spec(double value, int steps) const {
  const std::string v = fmt::format("{:.9g}", value);
  if (family == "newton") return "newton:" + std::to_string(steps) + ":" + v;
  if (family == "gd" && steps > 1) return "gd:" + v + ":" + std::to_string(steps);
  return family + ":" + v;
}

std::string FitSpec::ValueName() const {
  return family == "ridge" || family == "lasso" ? "lambda" : family == "newton" ? "C" : "alpha";
}

bool ParseFitSpec(const std::string& spec, FitSpec* out) {
  const core::Spec p = core::ParseSpec(spec);
  if (p.args.empty() || p.args[0] != "fit") return false;
  const std::string expected =
      "learner spec '" + spec +
      "': expected gd:fit, gd:fit:STEPS or gd:fit:LO..HI (steps in 1..1000), newton:fit, "
      "newton:fit:STEPS or newton:fit:LO..HI (steps in 1..100), sgd:fit, ridge:fit or lasso:fit";
  FitSpec f;
  f.family = p.name;
  const bool iterative = f.family == "gd" || f.family == "newton";
  const long long max_steps = f.family == "gd" ? 1000 : 100;
  if (f.family == "newton") f.steps_lo = 1, f.steps_hi = 30;
  if (iterative && p.args.size() == 2) {
    // STEPS, or LO..HI with LO < HI
    const std::string& arg = p.args[1];
    const auto dots = arg.find("..");
    const auto lo = core::ParseInteger(arg.substr(0, dots), 1, max_steps);
    const auto hi =
        dots == std::string::npos ? lo : core::ParseInteger(arg.substr(dots + 2), 1, max_steps);
    if (!lo || !hi || (dots != std::string::npos && !(*lo < *hi)))
      throw core::InputError("compare", "learners", expected);
    f.steps_lo = static_cast<int>(*lo), f.steps_hi = static_cast<int>(*hi);
  } else if (p.args.size() != 1 ||
             !(iterative || f.family == "sgd" || f.family == "ridge" || f.family == "lasso")) {
    throw core::InputError("compare", "learners", expected);
  }
  // Step sizes and starts from far below any useful one to past divergence for unit-variance
  // inputs; penalties (ridge's, the lasso's) from next to OLS to next to the zero predictor.
  f.lo = 1e-4;
  f.hi = f.family == "ridge" || f.family == "lasso" ? 1e4 : 1.0;
  if (out) *out = f;
  return true;
}

namespace {

// An iteration w <- w - 2 alpha (S w - X'y) (GD) or M <- 2M - M S M from C I (Newton) diverges
// once alpha lambda_max(S) >= 1 or C lambda_max(S) >= 2. A member of two or more steps within
// 10% of that on some fit prompt is refused: the scored prompts' largest lambda_max can exceed
// the fit prompts' (a Newton start fitted on 20 prompts diverged on some of the 2,000 scored).
constexpr double kDivergenceMargin = 0.9;

// The largest lambda_max(X_k'X_k) over the prompts of `set`, k the largest of `rows`.
double LargestCurvature(const data::PromptSet& set, const arma::uvec& rows) {
  const int d = set.task.d, k = static_cast<int>(rows.max());
  double most = 0;
  for (std::size_t i = 0; i < set.size() && k > 0; ++i) {
    const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, k, false, true);
    most = std::max(most, arma::eig_sym(arma::mat(x * x.t())).max());
  }
  return most;
}

bool NearDivergence(const FitSpec& spec, double value, int steps, double curvature) {
  const double limit = spec.family == "gd" ? 1.0 : spec.family == "newton" ? 2.0 : 0.0;
  return limit > 0 && steps >= 2 && value * curvature >= kDivergenceMargin * limit;
}

// A family member's predictions on `set` at `rows` for every step count in [steps_lo,
// steps_hi] (one slice for a family without steps): rows x N x steps.
arma::cube FamilyPredictions(const FitSpec& spec, double value, int steps_lo, int steps_hi,
                             const data::PromptSet& set, const arma::uvec& rows) {
  const int d = set.task.d, n = set.task.n;
  const auto l = learners::MakeLearner(spec.Spec(value, steps_hi), set.task);
  // Every step count from one run of the longest; at shifted queries one run per step count
  // (the step predictions are read at the examples themselves).
  const bool by_step = steps_hi > steps_lo && !set.task.HasQueries();
  std::vector<std::unique_ptr<learners::ClassicalLearner>> per_step;
  if (steps_hi > steps_lo && !by_step)
    for (int t = steps_lo; t <= steps_hi; ++t)
      per_step.push_back(learners::MakeLearner(spec.Spec(value, t), set.task));
  arma::cube out(rows.n_elem, set.size(), steps_hi - steps_lo + 1);
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (by_step) {
      const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, n, false, true);
      const arma::vec y(const_cast<double*>(set.y.colptr(i)), n, false, true);
      const arma::mat p = l->StepPredictions(x, y);  // steps_hi x n
      for (int t = steps_lo; t <= steps_hi; ++t)
        out.slice(t - steps_lo).col(i) = p.row(t - 1).t().eval().elem(rows);
    } else if (!per_step.empty()) {
      for (int t = steps_lo; t <= steps_hi; ++t) {
        learners::RunOnPrompt(*per_step[t - steps_lo], set, i, run);
        out.slice(t - steps_lo).col(i) = run.predictions.elem(rows);
      }
    } else {
      learners::RunOnPrompt(*l, set, i, run);
      out.slice(0).col(i) = run.predictions.elem(rows);
    }
  }
  return out;
}

// Mean over prompts and `rows` of (target - prediction)^2 / d for every step count of `pred`
// (FamilyPredictions from steps_lo on) at one value; infinite where a prediction is not finite
// or the member is near divergence (curvature: the fit prompts' LargestCurvature).
arma::vec FamilySpd(const FitSpec& spec, double value, int steps_lo, const arma::cube& pred,
                    const data::PromptSet& set, const arma::mat& target, const arma::uvec& rows,
                    double curvature) {
  const arma::mat want = target.rows(rows);  // the target at the fit's k, like pred
  arma::vec sum(pred.n_slices, arma::fill::zeros);
  for (arma::uword t = 0; t < pred.n_slices; ++t)
    for (std::size_t i = 0; i < set.size(); ++i)
      sum(t) += arma::accu(arma::square(want.col(i) - pred.slice(t).col(i)));
  arma::vec v = sum / (double(set.size()) * rows.n_elem * set.task.d);
  v.transform([](double e) { return std::isfinite(e) ? e : arma::datum::inf; });
  for (arma::uword t = 0; t < pred.n_slices; ++t)
    if (NearDivergence(spec, value, steps_lo + static_cast<int>(t), curvature))
      v(t) = arma::datum::inf;
  return v;
}

// The search grid of a family's value: 8 points per decade over [lo, hi], in log(value).
arma::vec FitGrid(const FitSpec& spec) {
  const double a = std::log(spec.lo), b = std::log(spec.hi);
  const int points = 1 + static_cast<int>(std::ceil(8 * (b - a) / std::log(10.0)));
  return arma::linspace(a, b, points);
}

// Brent's minimisation of f on [a, b]: a parabola through the three best points so far where
// it lands inside the bracket and shrinks the step, a golden-section step otherwise; stops when
// the bracket around the best point is within about 4 tol. On a smooth minimum it needs a
// third of golden-section's evaluations for the same bracket. Non-finite values never give a
// parabola (its coefficients are NaN), only golden-section steps. Returns {x, f(x)}.
template <typename F>
std::pair<double, double> BrentMinimum(F&& f, double a, double b, double tol) {
  const double c = (3 - std::sqrt(5.0)) / 2;
  double x = a + c * (b - a), w = x, v = x;
  double fx = f(x), fw = fx, fv = fx;
  double d = 0, e = 0;
  for (int it = 0; it < 100; ++it) {
    const double m = (a + b) / 2, tol2 = 2 * tol;
    if (std::abs(x - m) <= tol2 - (b - a) / 2) break;
    bool parabola = false;
    if (std::abs(e) > tol) {
      const double r = (x - w) * (fx - fv);
      double q = (x - v) * (fx - fw);
      double p = (x - v) * q - (x - w) * r;
      q = 2 * (q - r);
      if (q > 0) p = -p;
      q = std::abs(q);
      const double last = e;
      if (std::abs(p) < std::abs(q * last / 2) && p > q * (a - x) && p < q * (b - x)) {
        e = d;
        d = p / q;
        if (x + d - a < tol2 || b - x - d < tol2) d = x < m ? tol : -tol;
        parabola = true;
      }
    }
    if (!parabola) {
      e = x >= m ? a - x : b - x;
      d = c * e;
    }
    const double u = std::abs(d) >= tol ? x + d : x + (d > 0 ? tol : -tol);
    const double fu = f(u);
    if (fu <= fx) {
      (u >= x ? a : b) = x;
      v = w, fv = fw, w = x, fw = fx, x = u, fx = fu;
    } else {
      (u < x ? a : b) = u;
      if (fu <= fw || w == x) {
        v = w, fv = fw, w = u, fw = fu;
      } else if (fu <= fv || v == x || v == w) {
        v = u, fv = fu;
      }
    }
  }
  return {x, fx};
}

}  // namespace

FamilyGrid MakeFamilyGrid(const FitSpec& spec, const data::PromptSet& set,
                          const std::vector<int>& ks) {
  const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
  FamilyGrid g;
  g.grid = FitGrid(spec);
  g.curvature = LargestCurvature(set, rows);
  for (const double x : g.grid)
    g.predictions.push_back(
        FamilyPredictions(spec, std::exp(x), spec.steps_lo, spec.steps_hi, set, rows));
  return g;
}

std::size_t FamilyGridBytes(const FitSpec& spec, const data::PromptSet& set,
                            const std::vector<int>& ks) {
  return FitGrid(spec).n_elem * ks.size() * set.size() *
         static_cast<std::size_t>(spec.steps_hi - spec.steps_lo + 1) * sizeof(double);
}

FamilyFit FitFamily(const FitSpec& spec, const data::PromptSet& set, const arma::mat& target,
                    const std::vector<int>& ks, const FamilyGrid* shared) {
  if (ks.empty() || target.n_rows != arma::uword(set.task.n) || target.n_cols != set.size())
    throw std::logic_error("compare: a fit needs predictions n x N and at least one k");
  const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
  const int steps = spec.steps_hi - spec.steps_lo + 1;
  if (shared && (shared->predictions.size() != shared->grid.n_elem || shared->predictions.empty() ||
                 shared->predictions[0].n_rows != rows.n_elem ||
                 shared->predictions[0].n_cols != set.size() ||
                 shared->predictions[0].n_slices != arma::uword(steps)))
    throw std::logic_error("compare: a shared family grid of another fit set, window or family");
  const double curvature = shared ? shared->curvature : LargestCurvature(set, rows);
  // A grid of 8 points per decade by every step count (the grid keeps the search off a local
  // minimum between far-apart basins); its predictions do not depend on the target, so the
  // seeds of a cell can share them (`shared`).
  const arma::vec grid = shared ? shared->grid : FitGrid(spec);
  const int points = static_cast<int>(grid.n_elem);
  arma::mat value(points, steps);  // (grid point, step count)
  for (int i = 0; i < points; ++i)
    value.row(i) = FamilySpd(spec, std::exp(grid(i)), spec.steps_lo,
                             shared ? shared->predictions[i]
                                    : FamilyPredictions(spec, std::exp(grid(i)), spec.steps_lo,
                                                        spec.steps_hi, set, rows),
                             set, target, rows, curvature)
                       .t();
  // Brent's search in log(value), at one step count, between the grid neighbours of that
  // count's best grid point, to a bracket of about 1e-6; never ends worse than that point.
  std::vector<FamilyFit> refined(value.n_cols);
  std::vector<bool> done(value.n_cols, false);
  auto refine = [&](arma::uword j) {
    if (done[j]) return;
    done[j] = true;
    const int steps = spec.steps_lo + static_cast<int>(j);
    FamilyFit& out = refined[j];
    out.steps = steps, out.spd = arma::datum::inf;
    if (!std::isfinite(value.col(j).min())) return;
    const arma::uword best = value.col(j).index_min();
    auto spd = [&](double log_value) {
      const double v = std::exp(log_value);
      return FamilySpd(spec, v, steps, FamilyPredictions(spec, v, steps, steps, set, rows), set,
                       target, rows, curvature)(0);
    };
    const double lo = grid(best > 0 ? best - 1 : 0),
                 hi = grid(std::min<arma::uword>(best + 1, points - 1));
    const auto [x, fx] = BrentMinimum(spd, lo, hi, 2.5e-7);
    out.value = fx <= value(best, j) ? std::exp(x) : std::exp(grid(best));
    out.spd = std::min(fx, value(best, j));
    out.at_bound = best == 0 || best + 1 == arma::uword(points);
  };
  auto best_refined = [&] {
    arma::uword b = 0;
    for (arma::uword j = 0; j < refined.size(); ++j)
      if (done[j] && (!done[b] || refined[j].spd < refined[b].spd)) b = j;
    return b;
  };
  // The three step counts best on the grid are refined; then, since (value, steps) pairs lie
  // along near-equivalent valleys (GD: alpha times steps; Newton: one more step from half the
  // start), the neighbouring step counts of the best refined one, until neither is better.
  arma::uvec order = arma::sort_index(arma::min(value, 0).t());
  for (arma::uword r = 0; r < std::min<arma::uword>(3, order.n_elem); ++r)
    refine(order(r));
  for (arma::uword b = best_refined();;) {
    if (b > 0) refine(b - 1);
    if (b + 1 < value.n_cols) refine(b + 1);
    const arma::uword next = best_refined();
    if (next == b) break;
    b = next;
  }
  FamilyFit fit = refined[best_refined()];
  fit.steps_at_bound = spec.steps_hi > spec.steps_lo && fit.steps == spec.steps_hi;
  if (!std::isfinite(fit.spd))
    throw std::runtime_error("compare: every " + spec.family +
                             " learner of the search range diverges on these prompts");
  return fit;
}

}  // namespace icl::analysis
