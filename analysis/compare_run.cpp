// The compare pipeline: references on each learner's task, SPD, implicit weights, ILWD.
#include "analysis/compare_run.hpp"
#include "probes/uncertainty.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/output.hpp"
#include "core/spec.hpp"
#include "learners/trainer.hpp"

namespace icl::analysis {

namespace {

double MeanRange(const arma::vec& v, arma::uword lo, arma::uword hi) {  // mean of v[lo, hi)
  if (hi <= lo || v.is_empty()) return arma::datum::nan;
  return arma::mean(v.subvec(lo, std::min<arma::uword>(hi, v.n_elem) - 1));
}

std::string Cell(double v, bool best) {
  if (std::isnan(v)) return fmt::format("{:>11}", "-");
  return fmt::format("{:>10.3e}{}", v, best ? '*' : ' ');
}

// One reference learner on one prompt set: predictions n x N and, for a linear one, weights
// d x n x P on the first P prompts.
struct Reference {
  std::string spec;
  bool linear = false;
  arma::mat pred;
  arma::cube w;
};

Reference RunReference(const learners::ClassicalLearner& l, const data::PromptSet& set,
                       int contexts) {
  const int d = set.task.d, n = set.task.n, N = static_cast<int>(set.size());
  Reference r{l.spec(), l.is_linear(), arma::mat(n, N),
              arma::cube(d, n, l.is_linear() ? contexts : 0)};
  learners::LearnerRun run;
  for (int i = 0; i < N; ++i) {
    learners::RunOnPrompt(l, set, i, run);
    r.pred.col(i) = run.predictions;
    if (r.linear && i < contexts) r.w.slice(i) = run.weights;
  }
  return r;
}

// What every learner under test on one task shares: the scored and fit prompts and the
// references with no fitted hyperparameter (computed once per task, not once per checkpoint).
struct TaskReferences {
  data::PromptSet set, fit_set;
  std::vector<Reference> fixed;  // per spec item; empty Reference for a fit item
  int users = 0;                 // learners under test of this task
  std::vector<std::shared_ptr<const FamilyGrid>> grids;  // per fit item, once two users need it
};

// The most a cell's shared fit grids may hold (FamilyGridBytes); a larger one is recomputed per
// learner instead (the same fit, more time).
constexpr std::size_t kMaxSharedGrid = std::size_t(512) << 20;

// The items of --learners (core::SplitList: an empty one is refused, naming the setting).
std::vector<std::string> SplitSpecs(const std::string& specs) {
  return core::SplitList("compare", "learners", specs);
}

// Predictions n x N of a classical learner on every prompt of `set`.
arma::mat Predictions(const learners::ClassicalLearner& l, const data::PromptSet& set) {
  arma::mat p(set.task.n, set.size());
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    learners::RunOnPrompt(l, set, i, run);
    p.col(i) = run.predictions;
  }
  return p;
}

}  // namespace

std::string FitSpec::Spec(double value, int steps) const {
  const std::string v = fmt::format("{:.9g}", value);
  if (family == "newton") return "newton:" + std::to_string(steps) + ":" + v;
  if (family == "gd" && steps > 1) return "gd:" + v + ":" + std::to_string(steps);
  return family + ":" + v;
}

std::string FitSpec::ValueName() const {
  return family == "ridge" ? "lambda" : family == "newton" ? "C" : "alpha";
}

namespace {

// What the fitted hyperparameter of a fit spec is called (FitSpec::ValueName).
std::string ValueNameOf(const std::string& fit_spec) {
  FitSpec f;
  return ParseFitSpec(fit_spec, &f) ? f.ValueName() : "value";
}

}  // namespace

bool ParseFitSpec(const std::string& spec, FitSpec* out) {
  const core::Spec p = core::ParseSpec(spec);
  if (p.args.empty() || p.args[0] != "fit") return false;
  const std::string expected =
      "learner spec '" + spec +
      "': expected gd:fit, gd:fit:STEPS or gd:fit:LO..HI (steps in 1..1000), newton:fit, "
      "newton:fit:STEPS or newton:fit:LO..HI (steps in 1..100), sgd:fit or ridge:fit";
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
  } else if (p.args.size() != 1 || !(iterative || f.family == "sgd" || f.family == "ridge")) {
    throw core::InputError("compare", "learners", expected);
  }
  // Step sizes and starts from far below any useful one to past divergence for unit-variance
  // inputs; penalties from next to OLS to next to the zero predictor.
  f.lo = 1e-4;
  f.hi = f.family == "ridge" ? 1e4 : 1.0;
  if (out) *out = f;
  return true;
}

void CheckLearnerSpecs(const std::string& specs, const data::TaskConfig& task) {
  const std::vector<std::string> items = SplitSpecs(specs);
  std::string check;
  for (std::size_t i = 0; i < items.size(); ++i) {
    FitSpec f;
    check += (i ? "," : "") + (ParseFitSpec(items[i], &f) ? f.Spec(0.01, f.steps_hi) : items[i]);
  }
  learners::MakeLearners(check, task);
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

LearnerUnderTest TransformerUnderTest(const std::string& name, const data::TaskConfig& task,
                                      learners::Transformer model) {
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [model](const data::PromptSet& set) mutable {
    return learners::TransformerPredictions(model, set);
  };
  l.query = [model](const data::PromptSet& set, std::size_t first, std::size_t count,
                    const arma::cube& q) mutable {
    return learners::QueryPredictionsAllK(model, set, first, count, q);  // batched contexts
  };
  return l;
}

LearnerUnderTest ClassicalUnderTest(const std::string& name, const data::TaskConfig& task,
                                    std::shared_ptr<const learners::ClassicalLearner> learner) {
  if (!learner->is_linear())
    throw core::InputError(
        "compare", "learners",
        "'" + learner->spec() + "' is not linear; only linear learners answer queries here");
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [learner](const data::PromptSet& set) { return Predictions(*learner, set); };
  l.query = [learner](const data::PromptSet& set, std::size_t first, std::size_t count,
                      const arma::cube& q) {
    learners::LearnerRun run;
    const arma::uword n = set.task.n;
    arma::mat out(q.n_cols, q.n_slices);
    for (std::size_t c = 0; c < count; ++c) {
      learner->Run(set.x.slice(first + c), set.y.col(first + c), run);  // weights d x n
      for (arma::uword k = 0; k < n; ++k)
        out.col(c * n + k) = q.slice(c * n + k).t() * run.weights.col(k);
    }
    return out;
  };
  return l;
}

void CompareRequest::Validate() const {
  if (prompts < 1) throw core::InputError("compare", "prompts", "must be positive");
  if (ilwd_prompts < 1) throw core::InputError("compare", "ilwd_prompts", "must be positive");
  if (fit_prompts < 2 || fit_prompts > 1000000)
    throw core::InputError("compare", "fit_prompts",
                           "expected 2..1000000, got " + std::to_string(fit_prompts));
  task.Validate();
  if (queries != 0 && queries < task.d + 1)
    throw core::InputError(
        "compare", "queries",
        "the implicit-weight fit needs at least d+1 = " + std::to_string(task.d + 1) +
            " query points, got " + std::to_string(queries));
  // What the run holds at once, estimated before any allocation: the prompts (x, y and every
  // learner's predictions, about four copies of n (d + 1) numbers each), and the query points
  // of the ILWD contexts with their predictions (d + 2 numbers per query, context and k).
  const double n = task.n, d = task.d;
  core::RequireMemory(8.0 * (double(prompts) + fit_prompts) * n * (d + 1) * 4, "compare",
                      "prompts", "the prompts and their predictions");
  const double q = queries == 0 ? 2 * (d + 1) : queries;
  core::RequireMemory(8.0 * q * std::min(ilwd_prompts, prompts) * n * (d + 2), "compare",
                      "queries", "the query points of the implicit weights");
  CheckLearnerSpecs(learner_specs, task);
}

std::vector<int> SummaryWindow(int d, int n) {
  std::vector<int> ks;
  for (int k = 0; k < n; ++k)
    if (k != d && k != d + 1) ks.push_back(k);
  return ks;
}

CompareResult RunCompare(const std::vector<LearnerUnderTest>& models, const CompareRequest& req,
                         const std::function<void(long long, long long)>& progress) {
  if (models.empty()) throw core::InputError("compare", "", "no learner to compare");
  CompareResult out;
  out.d = models[0].task.d;
  out.n = models[0].task.n;
  CompareRequest checked = req;  // against the learners' own task
  checked.task = models[0].task;
  checked.Validate();
  for (const auto& m : models)
    if (m.task.d != out.d || m.task.n != out.n)
      throw core::InputError("compare", "",
                             "'" + m.name + "' reads d=" + std::to_string(m.task.d) +
                                 ", n=" + std::to_string(m.task.n) + " but '" + models[0].name +
                                 "' reads d=" + std::to_string(out.d) +
                                 ", n=" + std::to_string(out.n));
  // Fit specs are checked with a placeholder value and fitted per learner under test below.
  const std::vector<std::string> items = SplitSpecs(req.learner_specs);
  std::vector<FitSpec> fits(items.size());
  std::vector<bool> is_fit(items.size(), false);
  CheckLearnerSpecs(req.learner_specs, models[0].task);  // the first learner's task
  for (std::size_t i = 0; i < items.size(); ++i)
    is_fit[i] = ParseFitSpec(items[i], &fits[i]);
  const bool any_fit = std::find(is_fit.begin(), is_fit.end(), true) != is_fit.end();
  if (any_fit && req.all_pairs)
    throw core::InputError(
        "compare", "all_pairs",
        "all pairs compares reference learners with each other; a fitted learner "
        "(gd:fit, newton:fit, sgd:fit, ridge:fit) has a value only against a learner under test");
  const int d = out.d, n = out.n;
  out.prompts = req.prompts;
  out.fit_prompts = any_fit ? req.fit_prompts : 0;
  out.seed = req.seed;
  out.queries = req.queries == 0 ? 2 * (d + 1) : req.queries;
  out.contexts = std::min(req.ilwd_prompts, req.prompts);
  const int P = out.contexts, Q = out.queries;
  // The one summary window of every column, fixed before any result: k = d and d + 1 left out.
  // There minimum-norm OLS inverts X^T X of at most d + 1 Gaussian examples, whose inverse has
  // no finite mean under noise, and noiseless OLS jumps from its k < d error to 0, so one k
  // there can decide a verdict the other k do not support.
  const std::vector<int> ks = SummaryWindow(d, n);
  const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
  std::vector<std::pair<std::string, TaskReferences>> shared;  // by task JSON
  std::vector<std::string> task_keys;
  for (const auto& m : models)
    task_keys.push_back(m.task.ToJson());
  auto references_of = [&](const data::TaskConfig& t) -> TaskReferences& {
    const std::string key = t.ToJson();
    for (auto& [k, r] : shared)
      if (k == key) return r;
    TaskReferences r;
    r.users = static_cast<int>(std::count(task_keys.begin(), task_keys.end(), key));
    r.grids.resize(items.size());
    r.set = data::SamplePrompts(t, req.seed, 0, req.prompts);
    if (any_fit) r.fit_set = data::SamplePrompts(t, req.seed, req.prompts, req.fit_prompts);
    const auto learners = learners::MakeLearners(
        [&] {  // the fixed items, with placeholders for fit ones (not run)
          std::string specs;
          for (std::size_t i = 0; i < items.size(); ++i)
            specs += (i ? "," : "") + (is_fit[i] ? fits[i].Spec(0.01, fits[i].steps_hi) : items[i]);
          return specs;
        }(),
        t);
    for (std::size_t i = 0; i < items.size(); ++i)
      r.fixed.push_back(is_fit[i] ? Reference{} : RunReference(*learners[i], r.set, P));
    shared.emplace_back(key, std::move(r));
    return shared.back().second;
  };
  const long long total = static_cast<long long>(models.size()) * P;
  for (std::size_t c = 0; c < models.size(); ++c) {
    const auto& m = models[c];
    out.models.push_back(m.name);
    out.tasks.push_back(m.task);
    TaskReferences& ref = references_of(m.task);
    // Fitted learners: on prompts after the scored ones (disjoint from them), each family's
    // hyperparameters closest to this model.
    std::vector<FamilyFit> fitted(items.size(), FamilyFit{arma::datum::nan, arma::datum::nan});
    std::vector<Reference> fitted_ref(items.size());
    if (any_fit) {
      const arma::mat target = m.predict(ref.fit_set);
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!is_fit[i]) continue;
        // The grid's predictions are the same for every learner of this task: shared by the
        // seeds of a cell (built at the first that needs them), unless too large to keep.
        if (ref.users > 1 && !ref.grids[i] &&
            FamilyGridBytes(fits[i], ref.fit_set, ks) <= kMaxSharedGrid)
          ref.grids[i] =
              std::make_shared<const FamilyGrid>(MakeFamilyGrid(fits[i], ref.fit_set, ks));
        fitted[i] = FitFamily(fits[i], ref.fit_set, target, ks, ref.grids[i].get());
        fitted_ref[i] = RunReference(
            *learners::MakeLearner(fits[i].Spec(fitted[i].value, fitted[i].steps), m.task), ref.set,
            P);
      }
    }
    const arma::mat pred = m.predict(ref.set);
    arma::cube w(d, n, P);
    arma::mat r2(n, P);
    constexpr int kContextsPerCall = 64;  // a learner batches its forward passes within
    for (int first = 0; first < P; first += kContextsPerCall) {
      const int count = std::min(kContextsPerCall, P - first);
      arma::cube q(d, Q, static_cast<arma::uword>(count) * n);
      for (int i = first; i < first + count; ++i)
        for (int k = 0; k < n; ++k)
          q.slice((i - first) * n + k) = QueryPoints(d, Q, req.seed, std::uint64_t(i) * n + k);
      const arma::mat yhat = m.query(ref.set, first, count, q);
      for (int i = first; i < first + count; ++i)
        for (int k = 0; k < n; ++k) {
          const int s = (i - first) * n + k;
          const auto fit = FitImplicitWeights(q.slice(s), yhat.col(s));
          w.slice(i).col(k) = fit.w;
          r2(k, i) = fit.r2;
        }
      if (progress) progress(static_cast<long long>(c) * P + first + count, total);
    }
    out.implicit_r2.push_back(r2);
    out.summary_ks.push_back(ks);
    for (std::size_t j = 0; j < items.size(); ++j) {
      const Reference& b = is_fit[j] ? fitted_ref[j] : ref.fixed[j];
      CompareEntry e;
      e.model = m.name;
      e.learner = is_fit[j] ? items[j] : b.spec;
      e.spd = Spd(pred, b.pred, d);
      if (b.linear) e.ilwd = Ilwd(w, b.w);
      e.spd_per_prompt = arma::square(pred - b.pred) / d;  // n x N
      e.spd_prompt = arma::mean(e.spd_per_prompt.rows(rows), 0).t();
      if (is_fit[j]) {
        e.fitted = fitted[j].value, e.fit_spd = fitted[j].spd, e.fitted_spec = b.spec;
        e.fitted_steps = fits[j].family == "gd" || fits[j].family == "newton" ? fitted[j].steps : 0;
        e.fit_at_bound = fitted[j].at_bound || fitted[j].steps_at_bound;
      }
      out.entries.push_back(std::move(e));
    }
  }
  if (req.all_pairs) {
    const TaskReferences& ref = references_of(models[0].task);
    const auto& L = ref.fixed;
    for (std::size_t a = 0; a < L.size(); ++a)
      for (std::size_t b = a + 1; b < L.size(); ++b) {
        CompareEntry e;
        e.model = L[a].spec, e.learner = L[b].spec;
        e.spd = Spd(L[a].pred, L[b].pred, d);
        if (L[a].linear && L[b].linear) e.ilwd = Ilwd(L[a].w, L[b].w);
        out.entries.push_back(std::move(e));
      }
    for (const auto& l : L)
      if (std::find(out.models.begin(), out.models.end(), l.spec) == out.models.end())
        out.models.push_back(l.spec);
  }
  return out;
}

void WriteCompareCsv(std::ostream& os, const CompareResult& r) {
  os << "model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted,fitted_steps\n";
  for (const auto& e : r.entries)
    for (arma::uword k = 0; k < e.spd.mean.n_elem; ++k)
      os << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g},{},{},{}\n", core::CsvField(e.model),
                        e.learner, k, e.spd.mean(k), e.spd.lo(k), e.spd.hi(k),
                        e.ilwd.is_empty() ? std::string() : fmt::format("{:.9g}", e.ilwd(k)),
                        std::isnan(e.fitted) ? std::string() : fmt::format("{:.9g}", e.fitted),
                        e.fitted_steps > 0 ? std::to_string(e.fitted_steps) : std::string());
}

void WriteLinearityCsv(std::ostream& os, const CompareResult& r) {
  os << "model,k,r2,contexts\n";
  for (std::size_t c = 0; c < r.implicit_r2.size(); ++c)
    for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
      const arma::rowvec row = r.implicit_r2[c].row(k);
      const arma::uvec ok = arma::find_finite(row);
      os << fmt::format("{},{},{},{}\n", core::CsvField(r.models[c]), k,
                        ok.is_empty()
                            ? std::string()
                            : fmt::format("{:.9g}", arma::mean(arma::rowvec(row.cols(ok)))),
                        ok.n_elem);
    }
}

std::string FittedName(const CompareEntry& e) {
  FitSpec f;
  if (std::isnan(e.fitted) || !ParseFitSpec(e.learner, &f)) return e.learner;
  return f.steps_hi > f.steps_lo
             ? fmt::format("{} ({} {:.4g}, {} step{})", e.learner, f.ValueName(), e.fitted,
                           e.fitted_steps, e.fitted_steps == 1 ? "" : "s")
             : fmt::format("{} ({} {:.4g})", e.learner, f.ValueName(), e.fitted);
}

namespace {

// The closest reference learner by mean per-prompt summary SPD, and how much farther the
// runner-up is: the paired difference over prompts with a 95% bootstrap interval.
void PrintClosest(std::ostream& os, const std::vector<const CompareEntry*>& rows,
                  std::uint64_t seed) {
  std::vector<const CompareEntry*> ranked;
  for (const auto* e : rows)
    if (!e->spd_prompt.is_empty() && e->spd_prompt.is_finite()) ranked.push_back(e);
  if (ranked.size() < 2) return;
  std::sort(ranked.begin(), ranked.end(), [](const CompareEntry* a, const CompareEntry* b) {
    return arma::mean(a->spd_prompt) < arma::mean(b->spd_prompt);
  });
  auto name = [](const CompareEntry* e) { return FittedName(*e); };
  const arma::vec diff = ranked[1]->spd_prompt - ranked[0]->spd_prompt;
  const probes::Bootstrap boot(diff.n_elem, 1, probes::kDefaultReplicates, seed);
  const probes::Interval iv = probes::PercentileInterval(boot.Mean(0, diff));
  os << fmt::format(
      "closest (mean SPD / d over the summary k): {} {:.3e}; runner-up {}: {:+.2e} [{:+.2e}, "
      "{:+.2e}] farther ({})\n",
      name(ranked[0]), arma::mean(ranked[0]->spd_prompt), name(ranked[1]), arma::mean(diff), iv.lo,
      iv.hi, iv.lo > 0 ? "significant" : "within noise");
}

}  // namespace

void PrintCompareSummary(std::ostream& os, const CompareResult& r,
                         [[maybe_unused]] const std::string& specs) {
  const int d = r.d;
  os << fmt::format(
      "compare: d={} n={}, {} prompts (seed {}) of each checkpoint's task, ILWD on {} contexts x "
      "{} queries; values are divided by d\n",
      d, r.n, r.prompts, r.seed, r.contexts, r.queries);
  for (std::size_t c = 0; c < r.models.size(); ++c) {
    std::vector<const CompareEntry*> rows;
    for (const auto& e : r.entries)
      if (e.model == r.models[c]) rows.push_back(&e);
    if (rows.empty()) continue;
    std::array<std::vector<double>, 4> cols;
    for (const auto* e : rows) {
      cols[0].push_back(MeanRange(e->spd.mean, 0, d));
      cols[1].push_back(arma::mean(e->spd.mean));
      cols[2].push_back(MeanRange(e->ilwd, 0, d));
      cols[3].push_back(e->ilwd.is_empty() ? arma::datum::nan : arma::mean(e->ilwd));
    }
    std::array<double, 4> best;
    for (int j = 0; j < 4; ++j) {
      best[j] = arma::datum::inf;
      for (double v : cols[j])
        if (!std::isnan(v)) best[j] = std::min(best[j], v);
    }
    const std::string noise =
        c < r.tasks.size()
            ? fmt::format(
                  " (noise {:g}, w_scale {:g}{}{})", r.tasks[c].noise, r.tasks[c].w_scale,
                  r.tasks[c].context_shift.IsIdentity()
                      ? ""
                      : ", context shift " + r.tasks[c].context_shift.Spec(),
                  r.tasks[c].HasQueries() ? ", query shift " + r.tasks[c].query_shift.Spec() : "")
            : "";
    os << fmt::format("\n{}{} against:\n{:<16}{:>11}{:>11}{:>11}{:>11}\n", r.models[c], noise,
                      "learner", "SPD k<d", "SPD all k", "ILWD k<d", "ILWD all k");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << fmt::format("{:<16}", rows[i]->learner);
      for (int j = 0; j < 4; ++j)
        os << Cell(cols[j][i], cols[j][i] == best[j]);
      os << "\n";
    }
    for (const auto* e : rows)
      if (!std::isnan(e->fitted))
        os << fmt::format("{}: {} = {:.4g}{} (SPD / d {:.3e} on the {} fit prompts){}\n",
                          e->learner, ValueNameOf(e->learner), e->fitted,
                          e->fitted_steps > 0 ? fmt::format(", {} steps", e->fitted_steps) : "",
                          e->fit_spd, r.fit_prompts,
                          e->fit_at_bound ? "; at an end of the search range: the family's "
                                            "closest member may lie beyond it"
                                          : "");
    PrintClosest(os, rows, r.seed);
    if (c < r.implicit_r2.size()) {
      os << "implicit linear fit R2 by k (mean over contexts):";
      for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
        const arma::rowvec row = r.implicit_r2[c].row(k);
        const arma::uvec ok = arma::find_finite(row);
        os << fmt::format(
            " {}", ok.is_empty() ? std::string("-")
                                 : fmt::format("{:.3f}", arma::mean(arma::rowvec(row.cols(ok)))));
      }
      os << "\n";
    }
  }
  os << "* = closest learner in that column\n";
  if (r.tasks.size() > 1) {
    // The paper's noisy-regime layout: rows = reference learners, columns = learners under
    // test, with the paired significance of each column's minimum.
    const PairedTable t = MakePairedTable(r);
    os << fmt::format(
        "\nmean SPD / d over the window k != d, d+1 (rows: learners, columns: checkpoints; * = "
        "column minimum whose paired 95% interval against the runner-up excludes 0, ~ = a "
        "minimum that does not)\n{:<16}",
        "");
    for (const auto& c : t.columns)
      os << fmt::format("{:>24}", c.substr(0, 23));
    os << "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      os << fmt::format("{:<16}", t.rows[i].substr(0, 15));
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const PairedCell& x = t.cells[i][c];
        os << fmt::format("{:>23.3e}{}", x.mean, x.minimum ? (x.significant ? '*' : '~') : ' ');
      }
      os << "\n";
    }
    os << fmt::format(
        "\npaired difference from the diagonal learner (ridge with lambda = the column's "
        "sigma^2/tau^2), mean [95% bootstrap interval over the {} prompts]\n{:<16}",
        r.prompts, "");
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      os << fmt::format(
          "{:>34}",
          (t.columns[c] + " vs " + (t.diagonal[c].empty() ? "-" : t.diagonal[c])).substr(0, 33));
    os << "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      os << fmt::format("{:<16}", t.rows[i].substr(0, 15));
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const PairedCell& x = t.cells[i][c];
        os << (std::isnan(x.diff) ? fmt::format("{:>34}", "-")
                                  : fmt::format("{:>34}", fmt::format("{:+.2e} [{:+.2e}, {:+.2e}]",
                                                                      x.diff, x.lo, x.hi)));
      }
      os << "\n";
    }
  }
}

namespace {

// The ridge penalty a reference spec stands for on `task`, or NaN when it is no ridge learner.
double RidgeLambdaOf(const std::string& spec, const data::TaskConfig& task) {
  if (spec == "ols") return 0.0;
  if (spec == "bayes") return task.BayesLambda();
  const core::Spec p = core::ParseSpec(spec);
  if (p.name == "ridge" && p.args.size() == 1)
    if (const auto lambda = p.Number(0)) return *lambda;
  return arma::datum::nan;
}

}  // namespace

PairedTable MakePairedTable(const CompareResult& r, int replicates) {
  PairedTable t;
  t.replicates = replicates;
  const std::size_t C = r.tasks.size();
  for (std::size_t c = 0; c < C; ++c)
    t.columns.push_back(r.models[c]);
  for (const auto& e : r.entries)
    if (e.model == r.models[0]) t.rows.push_back(e.learner);
  t.cells.assign(t.rows.size(), std::vector<PairedCell>(C));
  const probes::Bootstrap boot(r.prompts, 1, replicates, r.seed);
  for (std::size_t c = 0; c < C; ++c) {
    std::vector<const CompareEntry*> col(t.rows.size(), nullptr);
    for (const auto& e : r.entries)
      if (e.model == r.models[c])
        for (std::size_t i = 0; i < t.rows.size(); ++i)
          if (e.learner == t.rows[i]) col[i] = &e;
    // The diagonal: the ridge whose lambda matches this column's noise (relative 1e-6, as
    // printed specs round lambda), preferring `bayes`.
    const double want = r.tasks[c].BayesLambda();
    int diag = -1;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const double l = RidgeLambdaOf(t.rows[i], r.tasks[c]);
      if (!std::isnan(l) && std::abs(l - want) <= 1e-6 * std::max(want, 1e-12) &&
          (diag < 0 || t.rows[i] == "bayes"))
        diag = static_cast<int>(i);
    }
    t.diagonal.push_back(diag < 0 ? "" : t.rows[diag]);
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      PairedCell& x = t.cells[i][c];
      x.mean = arma::mean(col[i]->spd_prompt);
      x.diff = x.lo = x.hi = arma::datum::nan;
      if (diag >= 0) {
        const arma::vec delta = col[i]->spd_prompt - col[diag]->spd_prompt;
        const probes::Interval ci = probes::PercentileInterval(boot.Mean(0, delta));
        x.diff = arma::mean(delta), x.lo = ci.lo, x.hi = ci.hi;
      }
      order.emplace_back(x.mean, i);
    }
    std::sort(order.begin(), order.end());
    if (order.empty()) continue;
    PairedCell& best = t.cells[order[0].second][c];
    best.minimum = true;
    if (order.size() > 1) {
      const arma::vec gap = col[order[1].second]->spd_prompt - col[order[0].second]->spd_prompt;
      best.significant = probes::PercentileInterval(boot.Mean(0, gap)).lo > 0;
    }
  }
  return t;
}

void WritePairedCsv(std::ostream& os, const PairedTable& t) {
  os << "model,learner,spd_summary,diagonal,diff,diff_lo,diff_hi,minimum,significant\n";
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const PairedCell& x = t.cells[i][c];
      os << fmt::format("{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{},{}\n",
                        core::CsvField(t.columns[c]), t.rows[i], x.mean, t.diagonal[c], x.diff,
                        x.lo, x.hi, int(x.minimum), int(x.significant));
    }
}

}  // namespace icl::analysis
