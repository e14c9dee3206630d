// The classical in-context learners the transformer is compared with (docs/paper.md
// "Reference learners"): OLS, ridge, Bayes ridge, one-step GD, one-pass SGD, kNN and the zero
// predictor.
#pragma once

#include <armadillo>
#include <memory>
#include <string>
#include <vector>

#include "data/task.hpp"

namespace icl::learners {

// What a learner returns for one prompt of n examples.
struct LearnerRun {
  arma::vec predictions;  // n: entry k is the prediction of y_{k+1} from the first k examples
  arma::mat weights;      // d x n: column k = weights after k examples (linear learners only)
};

class ClassicalLearner {
 public:
  virtual ~ClassicalLearner() = default;
  // The spec string that names this learner, e.g. "ridge:0.1".
  virtual std::string spec() const = 0;
  virtual bool is_linear() const = 0;
  // x: d x n (column j = x_j), y: n. Fills out.predictions, and out.weights when linear.
  virtual void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const = 0;
  // Iterative learners (gd:ALPHA:STEPS, newton): the predictions after every step count
  // t = 1..STEPS in one run, STEPS x n; row t - 1 equals Run's predictions of the same learner
  // with t steps, bit for bit (the same arithmetic in the same order). Others: empty.
  virtual arma::mat StepPredictions(const arma::mat&, const arma::vec&) const { return {}; }
};

// The learner on prompt i of `set`: Run on its examples, the predictions read at the queries of
// a query-shifted task (PromptSet::QueryX): a linear learner's weights after k examples times
// the query, any other run once per k with the query in place of example k + 1.
void RunOnPrompt(const ClassicalLearner& learner, const data::PromptSet& set, std::size_t i,
                 LearnerRun& out);

// Squared error of each prediction divided by d: n x N, entry (k, i) is
// (prediction of y_{k+1} from k examples - y_{k+1})^2 / d for prompt i (the query's label for a
// query-shifted task).
arma::mat PerPromptErrors(const data::PromptSet& set, const ClassicalLearner& learner);

// Parses one spec: ols | ridge:LAMBDA | bayes | gd:ALPHA[:STEPS] | sgd:ALPHA |
// newton:STEPS (Fu et al.'s start) | newton:STEPS:C[:LAMBDA] | knn:K[:weighted] | zero |
// dmmse (the posterior mean over the task's pool) | bayes-mix (over a noise-mix task's levels) |
// bayes-sparse (over a sparse task's supports) | lasso:LAMBDA: learners/task_family_learners.hpp.
// `bayes` is ridge with lambda = sigma^2 / tau^2 of `task`. Throws core::InputError
// saying what was expected for an unknown or malformed spec, naming `field`: the setting the
// spec came from (a stage's "algorithm", extract's "learner_targets"), so that the message
// names what the user typed.
// `trained`: the task a learner under test was trained on, whose pool (its family, scale and
// used dimensions) dmmse averages over when `task` has none (a pool-trained learner compared on
// fresh tasks: its training pool is the hypothesis); null: the task's own.
std::unique_ptr<ClassicalLearner> MakeLearner(const std::string& spec, const data::TaskConfig& task,
                                              const std::string& field = "learners",
                                              const data::TaskConfig* trained = nullptr);
// Parses a comma-separated list of specs (core::SplitList: an empty entry is refused); a spec
// listed twice is refused too.
std::vector<std::unique_ptr<ClassicalLearner>> MakeLearners(
    const std::string& specs, const data::TaskConfig& task, const std::string& field = "learners",
    const data::TaskConfig* trained = nullptr);

// The learners themselves, usable directly.
class RidgeLearner : public ClassicalLearner {  // lambda = 0 is minimum-norm OLS
 public:
  RidgeLearner(double lambda, std::string spec);
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;

 private:
  double lambda_;
  std::string spec_;
};

// `steps` steps of batch GD on the k examples so far, from w0 = 0:
// w_{t+1} = w_t - 2 alpha (X^T X w_t - X^T y); one step gives 2 alpha X^T y.
class GdLearner : public ClassicalLearner {
 public:
  explicit GdLearner(double alpha, int steps = 1);
  std::string spec() const override;
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  arma::mat StepPredictions(const arma::mat& x, const arma::vec& y) const override;

 private:
  // Calls visit(k, t, w_t) for k = 1..n-1 and t = 1..steps, in that order.
  template <typename Visit>
  void Iterate(const arma::mat& x, const arma::vec& y, Visit visit) const;
  double alpha_;
  int steps_;
};

// One pass of SGD, batch 1, from w0 = 0: w_i = w_{i-1} - 2 alpha (x_i x_i^T w_{i-1} - y_i x_i).
class SgdLearner : public ClassicalLearner {
 public:
  explicit SgdLearner(double alpha);
  std::string spec() const override;
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;

 private:
  double alpha_;
};

// K steps of Newton-Schulz on A = X^T X + lambda I from the fixed start Y_0 = C I:
// Y_{t+1} = Y_t (2 I - A Y_t), then w = Y_K X^T y (w = 0 with no example). With no per-prompt
// scale the iteration is what a transformer's weights can compile (construct/'s newton program).
// It converges to A^{-1} (so w to ridge:lambda, or for lambda = 0 and k >= d to OLS) exactly when
// 0 < C < 2 / lambda_max(A); then ||I - A Y_t|| = ||I - C A||^(2^t). For a prompt outside that
// range the iterates grow without bound and the learner reports them as they come (possibly
// infinite). With lambda = 0 and fewer independent examples than d, A is singular: along its
// null space Y doubles every step, which X^T y does not reach in exact arithmetic, but whose
// rounding (1e-16) grows as 2^STEPS in floating point. Diverges() says which k are in either
// case.
//
// With `scaled_start` (the spec newton:K, Fu et al. 2023's iteration) the start is per prompt,
// Y_0 = alpha S with S = X^T X and alpha = 2 / ||S S^T||_F, and lambda = 0: the eigenvalues of
// S Y_0, alpha mu^2, lie in (0, 2] (||S^2||_F >= mu_max^2), Y_t stays in the range of S and
// converges to S^+ (w to minimum-norm OLS) without the null-space doubling. At the edge, one
// example (S of rank one, alpha mu^2 = 2), Y_1 = 0: their learner predicts 0 there after any
// step. Diverges() is always false for it.
class NewtonLearner : public ClassicalLearner {
 public:
  NewtonLearner(int steps, double start, double lambda, std::string spec,
                bool scaled_start = false);
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  arma::mat StepPredictions(const arma::mat& x, const arma::vec& y) const override;
  // True when C >= 2 / lambda_max(A) (the iteration does not converge) or A = X_k^T X_k + lambda I
  // is singular to working precision (lambda = 0, k < d: the iterates double along its null
  // space).
  bool Diverges(const arma::mat& xtx) const;

 private:
  // Calls visit(k, t, w_t) for k = 1..n-1 and t = 1..steps, in that order.
  template <typename Visit>
  void Iterate(const arma::mat& x, const arma::vec& y, Visit visit) const;
  int steps_;
  double start_, lambda_;
  std::string spec_;
  bool scaled_start_;
};

// Mean y of the K nearest earlier x (all of them when fewer than K), optionally weighted by
// 1 / distance^2; an exact match takes that point's y. With no earlier point: 0.
class KnnLearner : public ClassicalLearner {
 public:
  KnnLearner(int neighbours, bool weighted);
  std::string spec() const override;
  bool is_linear() const override { return false; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;

 private:
  int neighbours_;
  bool weighted_;
};

class ZeroLearner : public ClassicalLearner {
 public:
  std::string spec() const override { return "zero"; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
};

}  // namespace icl::learners
