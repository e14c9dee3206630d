// Classical learners and their spec strings.
#include "learners/classical.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "core/spec.hpp"
#include "data/targets.hpp"
#include "learners/task_family_learners.hpp"

namespace icl::learners {

namespace {

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Fills predictions from weights: prediction k = w_k . x_{k+1}.
void PredictFromWeights(const arma::mat& x, LearnerRun& out) {
  const int n = x.n_cols;
  out.predictions.set_size(n);
  for (int k = 0; k < n; ++k)
    out.predictions(k) = arma::dot(out.weights.col(k), x.col(k));
}

const char* kSpecHelp =
    "one of ols, ridge:LAMBDA, bayes, gd:ALPHA[:STEPS], sgd:ALPHA, newton:STEPS, "
    "newton:STEPS:C[:LAMBDA], "
    "knn:K, knn:K:weighted, zero, dmmse, bayes-mix, bayes-sparse, lasso:LAMBDA";

}  // namespace

RidgeLearner::RidgeLearner(double lambda, std::string spec)
    : lambda_(lambda), spec_(std::move(spec)) {
  if (!(lambda >= 0))
    throw core::InputError("learners", "learners",
                           "learner spec '" + spec_ + "': lambda must be >= 0");
}

void RidgeLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const int d = x.n_rows, n = x.n_cols;
  out.weights.zeros(d, n);
  data::IncrementalRidge ridge(d, lambda_);
  for (int k = 1; k < n; ++k) {
    ridge.Add(x.colptr(k - 1), y(k - 1));
    out.weights.col(k) = ridge.weights();
  }
  PredictFromWeights(x, out);
}

GdLearner::GdLearner(double alpha, int steps) : alpha_(alpha), steps_(steps) {}
std::string GdLearner::spec() const {
  return "gd:" + FormatNumber(alpha_) + (steps_ == 1 ? "" : ":" + std::to_string(steps_));
}

void GdLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const int d = x.n_rows, n = x.n_cols;
  out.weights.zeros(d, n);
  Iterate(x, y, [&](int k, int t, const arma::vec& w) {
    if (t == steps_) out.weights.col(k) = w;
  });
  PredictFromWeights(x, out);
}

arma::mat GdLearner::StepPredictions(const arma::mat& x, const arma::vec& y) const {
  arma::mat p(steps_, x.n_cols, arma::fill::zeros);  // no example: w = 0 after any step
  Iterate(x, y, [&](int k, int t, const arma::vec& w) { p(t - 1, k) = arma::dot(w, x.col(k)); });
  return p;
}

template <typename Visit>
void GdLearner::Iterate(const arma::mat& x, const arma::vec& y, Visit visit) const {
  const int d = x.n_rows, n = x.n_cols;
  arma::vec xty(d, arma::fill::zeros);
  arma::mat xtx(d, d, arma::fill::zeros);
  for (int k = 1; k < n; ++k) {
    xty += y(k - 1) * x.col(k - 1);
    xtx += x.col(k - 1) * x.col(k - 1).t();
    arma::vec w = 2.0 * alpha_ * xty;  // the first step from w0 = 0
    visit(k, 1, w);
    for (int t = 2; t <= steps_; ++t) {
      w -= 2.0 * alpha_ * (xtx * w - xty);
      visit(k, t, w);
    }
  }
}

NewtonLearner::NewtonLearner(int steps, double start, double lambda, std::string spec,
                             bool scaled_start)
    : steps_(steps),
      start_(start),
      lambda_(lambda),
      spec_(std::move(spec)),
      scaled_start_(scaled_start) {}

bool NewtonLearner::Diverges(const arma::mat& xtx) const {
  if (scaled_start_) return false;
  const arma::vec eig = arma::eig_sym(xtx) + lambda_;
  const double singular = eig.max() * double(eig.n_elem) * arma::datum::eps;
  return !(start_ * eig.max() < 2.0) || !(eig.min() > singular);
}

void NewtonLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  out.weights.zeros(x.n_rows, x.n_cols);
  Iterate(x, y, [&](int k, int t, const arma::vec& w) {
    if (t == steps_) out.weights.col(k) = w;
  });
  PredictFromWeights(x, out);
}

arma::mat NewtonLearner::StepPredictions(const arma::mat& x, const arma::vec& y) const {
  arma::mat p(steps_, x.n_cols, arma::fill::zeros);
  Iterate(x, y, [&](int k, int t, const arma::vec& w) { p(t - 1, k) = arma::dot(w, x.col(k)); });
  return p;
}

template <typename Visit>
void NewtonLearner::Iterate(const arma::mat& x, const arma::vec& y, Visit visit) const {
  const int d = x.n_rows, n = x.n_cols;
  arma::vec xty(d, arma::fill::zeros);
  arma::mat a = lambda_ * arma::eye(d, d);
  const arma::mat two = 2.0 * arma::eye(d, d);
  for (int k = 1; k < n; ++k) {
    xty += y(k - 1) * x.col(k - 1);
    a += x.col(k - 1) * x.col(k - 1).t();
    // Y_0 = C I, or Fu et al.'s alpha S with alpha = 2 / ||S S^T||_F.
    arma::mat inv = scaled_start_ ? (2.0 / arma::norm(a * a.t(), "fro")) * a
                                  : arma::mat(start_ * arma::eye(d, d));
    for (int t = 1; t <= steps_; ++t) {
      inv = inv * (two - a * inv);  // Y_t = Y_{t-1} (2 I - A Y_{t-1})
      visit(k, t, arma::vec(inv * xty));
    }
  }
}

SgdLearner::SgdLearner(double alpha) : alpha_(alpha) {}
std::string SgdLearner::spec() const {
  return "sgd:" + FormatNumber(alpha_);
}

void SgdLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const int d = x.n_rows, n = x.n_cols;
  out.weights.zeros(d, n);
  arma::vec w(d, arma::fill::zeros);
  for (int k = 1; k < n; ++k) {
    const auto xi = x.col(k - 1);
    // w_i = w_{i-1} - 2 alpha (x_i x_i^T w_{i-1} - y_i x_i), docs/paper.md "Reference learners"
    w -= 2.0 * alpha_ * (arma::dot(xi, w) - y(k - 1)) * xi;
    out.weights.col(k) = w;
  }
  PredictFromWeights(x, out);
}

KnnLearner::KnnLearner(int neighbours, bool weighted)
    : neighbours_(neighbours), weighted_(weighted) {}
std::string KnnLearner::spec() const {
  return "knn:" + std::to_string(neighbours_) + (weighted_ ? ":weighted" : "");
}

void KnnLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const int n = x.n_cols;
  out.weights.reset();
  out.predictions.zeros(n);
  std::vector<std::pair<double, int>> dist;
  for (int k = 1; k < n; ++k) {
    dist.clear();
    for (int j = 0; j < k; ++j)
      dist.emplace_back(arma::accu(arma::square(x.col(j) - x.col(k))), j);
    const int m = std::min(neighbours_, k);
    std::partial_sort(dist.begin(), dist.begin() + m, dist.end());
    if (!weighted_) {
      double s = 0;
      for (int i = 0; i < m; ++i)
        s += y(dist[i].second);
      out.predictions(k) = s / m;
      continue;
    }
    if (dist[0].first == 0.0) {  // exact match: 1/0 weight dominates
      out.predictions(k) = y(dist[0].second);
      continue;
    }
    double num = 0, den = 0;
    for (int i = 0; i < m; ++i) {
      const double wt = 1.0 / dist[i].first;
      num += wt * y(dist[i].second);
      den += wt;
    }
    out.predictions(k) = num / den;
  }
}

void ZeroLearner::Run(const arma::mat& x, const arma::vec&, LearnerRun& out) const {
  out.weights.zeros(x.n_rows, x.n_cols);
  out.predictions.zeros(x.n_cols);
}

void RunOnPrompt(const ClassicalLearner& learner, const data::PromptSet& set, std::size_t i,
                 LearnerRun& out) {
  // A noise mixture's oracle runs the ridge of the level this prompt drew.
  if (const auto* oracle = dynamic_cast<const OracleRidgeLearner*>(&learner)) {
    if (i >= set.draw.size())
      throw core::InputError("learners", "learners",
                             "oracle-ridge needs prompts of a noise-mix task, which record each "
                             "prompt's noise level; these prompts record none");
    RunOnPrompt(oracle->ForLevel(set.draw[i]), set, i, out);
    return;
  }
  const int d = set.task.d, n = set.task.n;
  const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, n, false, true);
  const arma::vec y(const_cast<double*>(set.y.colptr(i)), n, false, true);
  learner.Run(x, y, out);
  if (!set.task.HasQueries()) return;
  if (learner.is_linear()) {
    for (int k = 0; k < n; ++k)
      out.predictions(k) =
          arma::dot(out.weights.col(k), arma::vec(const_cast<double*>(set.QueryX(i, k)), d, false));
    return;
  }
  // Example k + 1 is only ever the query of prediction k: replacing it changes nothing earlier.
  arma::mat xq = x;
  LearnerRun one;
  for (int k = 0; k < n; ++k) {
    xq.col(k) = arma::vec(const_cast<double*>(set.QueryX(i, k)), d, false);
    learner.Run(xq, y, one);
    out.predictions(k) = one.predictions(k);
    xq.col(k) = x.col(k);
  }
}

arma::mat PerPromptErrors(const data::PromptSet& set, const ClassicalLearner& learner) {
  const int d = set.task.d, n = set.task.n;
  arma::mat err(n, set.size());
  LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    RunOnPrompt(learner, set, i, run);
    for (int k = 0; k < n; ++k)
      err(k, i) =
          (run.predictions(k) - set.QueryY(i, k)) * (run.predictions(k) - set.QueryY(i, k)) / d;
  }
  return err;
}

namespace {

std::unique_ptr<ClassicalLearner> ParseLearner(const std::string& raw, const data::TaskConfig& task,
                                               const data::TaskConfig* trained) {
  const core::Spec p = core::ParseSpec(raw);
  const std::string& spec = p.text;
  auto fail = [&](const std::string& expected) {
    throw core::InputError("learners", "learners",
                           "learner spec '" + spec + "': expected " + expected);
  };
  auto arity = [&](std::size_t lo, std::size_t hi, const std::string& expected) {
    if (p.args.size() < lo || p.args.size() > hi) fail(expected);
  };
  if (p.name == "ols") {
    arity(0, 0, "ols");
    return std::make_unique<RidgeLearner>(0.0, "ols");
  }
  if (p.name == "ridge") {
    const std::string form = "ridge:LAMBDA with LAMBDA a non-negative number, e.g. ridge:0.1";
    arity(1, 1, form);
    const auto lambda = p.Number(0);
    if (!lambda || *lambda < 0) fail(form);
    return std::make_unique<RidgeLearner>(*lambda, "ridge:" + p.args[0]);
  }
  if (p.name == "bayes") {
    arity(0, 0, "bayes");
    return std::make_unique<RidgeLearner>(task.BayesLambda(), "bayes");
  }
  if (p.name == "gd" || p.name == "sgd") {
    const bool gd = p.name == "gd";
    const std::string form =
        gd ? "gd:ALPHA or gd:ALPHA:STEPS with ALPHA a positive step size and STEPS an integer in "
             "1..1000, e.g. gd:0.01 or gd:0.01:3"
           : "sgd:ALPHA with ALPHA a positive step size, e.g. sgd:0.01";
    arity(1, gd ? 2 : 1, form);
    const auto alpha = p.Number(0);
    if (!alpha || !(*alpha > 0)) fail(form);
    if (!gd) return std::make_unique<SgdLearner>(*alpha);
    const auto steps = p.args.size() == 2 ? p.Integer(1, 1, 1000) : std::optional<long long>(1);
    if (!steps) fail(form);
    return std::make_unique<GdLearner>(*alpha, static_cast<int>(*steps));
  }
  if (p.name == "newton") {
    const std::string form =
        "newton:STEPS (Fu et al.: Y_0 = 2 X^T X / ||(X^T X)^2||_F), newton:STEPS:C or "
        "newton:STEPS:C:LAMBDA with STEPS an integer in 1..100, C > 0 the start Y_0 = C I and "
        "LAMBDA >= 0, e.g. newton:3 or newton:12:0.05:0.25";
    arity(1, 3, form);
    if (p.args.size() == 1) {
      const auto steps = p.Integer(0, 1, 100);
      if (!steps) fail(form);
      return std::make_unique<NewtonLearner>(static_cast<int>(*steps), 0.0, 0.0, spec,
                                             /*scaled_start=*/true);
    }
    const auto steps = p.Integer(0, 1, 100);
    const auto start = p.Number(1);
    const auto lambda = p.args.size() == 3 ? p.Number(2) : std::optional<double>(0.0);
    if (!steps || !start || !(*start > 0) || !lambda || !(*lambda >= 0)) fail(form);
    return std::make_unique<NewtonLearner>(static_cast<int>(*steps), *start, *lambda, spec);
  }
  if (p.name == "knn") {
    const std::string form = "knn:K or knn:K:weighted with K a positive integer, e.g. knn:3";
    arity(1, 2, form);
    const auto k = p.Integer(0, 1, 1000000);
    if (!k || (p.args.size() == 2 && p.args[1] != "weighted")) fail(form);
    return std::make_unique<KnnLearner>(static_cast<int>(*k), p.args.size() == 2);
  }
  if (p.name == "zero") {
    arity(0, 0, "zero");
    return std::make_unique<ZeroLearner>();
  }
  if (auto learner = MakeTaskFamilyLearner(p, task, trained)) return learner;
  throw core::InputError("learners", "learners",
                         "unknown learner spec '" + spec + "': expected " + kSpecHelp);
}

}  // namespace

std::unique_ptr<ClassicalLearner> MakeLearner(const std::string& spec, const data::TaskConfig& task,
                                              const std::string& field,
                                              const data::TaskConfig* trained) {
  try {
    return ParseLearner(spec, task, trained);
  } catch (const core::InputError& e) {
    // The setting the spec came from, so that the message names what the user typed.
    if (e.field() == field) throw;
    throw core::InputError(e.module(), field, e.text());
  }
}

std::vector<std::unique_ptr<ClassicalLearner>> MakeLearners(const std::string& specs,
                                                            const data::TaskConfig& task,
                                                            const std::string& field,
                                                            const data::TaskConfig* trained) {
  std::vector<std::unique_ptr<ClassicalLearner>> out;
  for (const std::string& s : core::SplitList("learners", field, specs)) {
    out.push_back(MakeLearner(s, task, field, trained));
    for (std::size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i]->spec() == out.back()->spec())
        throw core::InputError(
            "learners", field,
            "learner list '" + specs + "': " + out.back()->spec() + " is listed twice");
  }
  return out;
}

}  // namespace icl::learners
