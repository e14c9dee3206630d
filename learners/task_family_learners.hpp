// The Bayes-optimal learners of the task families (data/task_family.hpp): the posterior mean of
// w over a finite pool (dMMSE, Raventos et al. 2023), over a mixture of noise levels (Bai et al.
// 2023) and over the supports of a sparse w. Each is a ClassicalLearner, made by MakeLearner
// from its spec and the task it is compared on.
#pragma once

#include <armadillo>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "learners/classical.hpp"

namespace icl::learners {

// dMMSE: the posterior mean of w over the M members w_m of a pool (columns of `pool`, d x M),
// uniform prior, Gaussian noise sigma, after each number of examples k:
//   p(m | D_k) = exp(-R_m(k) / (2 sigma^2)) / Z,   R_m(k) = sum_{j <= k} (y_j - w_m' x_j)^2,
//   w_k = sum_m p(m | D_k) w_m,
// with the largest log weight subtracted before the exponential (log space: no underflow of Z).
// sigma = 0 is the limit sigma -> 0: the mean of the members whose R_m(k) is the least (to
// rounding, 1e-12 of the labels' sum of squares), which for a prompt drawn from the pool is its
// own member once the examples single it out; with no example, the pool's mean.
// The learner a spec names if it is one of this file's (dmmse, bayes-mix, oracle-ridge,
// bayes-sparse, lasso:LAMBDA), checked against the task (and, for dmmse, the task a learner under
// test was trained on: MakeLearner's `trained`); nullptr for any other name. core::InputError
// (setting "learners") for a malformed spec or a task the learner is not for.
std::unique_ptr<ClassicalLearner> MakeTaskFamilyLearner(const core::Spec& spec,
                                                        const data::TaskConfig& task,
                                                        const data::TaskConfig* trained);

class DmmseLearner : public ClassicalLearner {
 public:
  DmmseLearner(arma::mat pool, double sigma, std::string spec = "dmmse");
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  const arma::mat& pool() const { return pool_; }

 private:
  arma::mat pool_;  // d x M
  double sigma_;
  std::string spec_;
};

// The posterior mean of w when each prompt's noise sigma is one of sigma_c with prior
// probability pi_c and w ~ N(0, tau^2 I): given c, w's posterior mean is ridge with
// lambda_c = sigma_c^2 / tau^2, and c's posterior weight is pi_c times the evidence
//   N(y_k | 0, tau^2 X_k X_k' + sigma_c^2 I), whose logarithm is, with A_c = X'X + lambda_c I,
//   b = X'y:  -(1/2) [k log sigma_c^2 + log det A_c - d log lambda_c + (y'y - b' A_c^-1 b) /
//   sigma_c^2] + const
// (Woodbury and the matrix determinant lemma, so only d x d systems are solved). Every sigma_c
// must be > 0 (at 0 the evidence is degenerate).
class BayesMixLearner : public ClassicalLearner {
 public:
  BayesMixLearner(std::vector<double> sigmas, std::vector<double> probs, double tau,
                  std::string spec = "bayes-mix");
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  // The posterior over the noise levels after each k: C x n.
  arma::mat Posterior(const arma::mat& x, const arma::vec& y) const;

 private:
  std::vector<double> sigmas_, probs_;
  double tau_;
  std::string spec_;
};

// The oracle of a noise mixture: ridge with each prompt's own lambda_c = sigma_c^2 / tau^2, sigma_c
// the level that prompt drew (PromptSet::draw), the Bayes predictor for a learner told the
// level. Against it and the best single ("compromise") ridge, a learner trained on the mixture
// shows whether it selects lambda per prompt (Bai et al. 2023). It needs the prompt's draw, so it
// runs only through RunOnPrompt (compare, baselines); Run, which has no draw, throws
// core::InputError.
class OracleRidgeLearner : public ClassicalLearner {
 public:
  OracleRidgeLearner(const std::vector<double>& sigmas, double tau,
                     std::string spec = "oracle-ridge");
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  // The ridge of level c (an index into the task's sigmas, as PromptSet::draw holds it).
  const ClassicalLearner& ForLevel(std::int64_t c) const;

 private:
  std::vector<std::unique_ptr<ClassicalLearner>> levels_;
  std::string spec_;
};

// The posterior mean of w when w has S non-zero coordinates (every support of size S among the
// `used` first coordinates equally likely), N(0, tau^2) on the support, and noise sigma > 0: the
// evidence-weighted mean, over every support T, of ridge on the columns of T with lambda =
// sigma^2 / tau^2 (the same evidence as BayesMixLearner's, with the support's columns). The
// supports are enumerated: at most kMaxSupports of them.
class BayesSparseLearner : public ClassicalLearner {
 public:
  static constexpr long long kMaxSupports = 100000;
  BayesSparseLearner(int used, int sparsity, double sigma, double tau,
                     std::string spec = "bayes-sparse");
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  // C(used, sparsity), or -1 when it is over kMaxSupports.
  static long long SupportCount(int used, int sparsity);

 private:
  std::vector<std::vector<arma::uword>> supports_;
  double sigma_, tau_;
  std::string spec_;
};

// The lasso, the classical learner of sparse regression: after k examples
//   w_k = argmin_w (1/2) ||y_k - X_k w||^2 + lambda ||w||_1
// (no 1/k in front of the squares: lambda is on the scale of X'y), by cyclic coordinate descent
// on the Gram matrix G = X'X, b = X'y (w_i <- soft(b_i - sum_{j != i} G_ij w_j, lambda) / G_ii),
// warm-started from w_{k-1}. Its KKT conditions, g = b - G w: g_i = lambda sign(w_i) where
// w_i != 0 and |g_i| <= lambda where w_i = 0; the sweeps stop when no condition is off by more
// than 1e-11 (1 + max |b_i|) (at most kMaxSweeps sweeps). lambda > 0 (at 0 and k < d the
// minimiser is not unique); as lambda -> 0 with k > d it is OLS.
class LassoLearner : public ClassicalLearner {
 public:
  static constexpr int kMaxSweeps = 10000;
  explicit LassoLearner(double lambda, std::string spec);
  std::string spec() const override { return spec_; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const override;
  // The minimiser for G = X'X and b = X'y from the start w (updated in place).
  void Solve(const arma::mat& G, const arma::vec& b, arma::vec& w) const;
  // The largest violation of the KKT conditions at w.
  double KktViolation(const arma::mat& G, const arma::vec& b, const arma::vec& w) const;

 private:
  double lambda_;
  std::string spec_;
};

}  // namespace icl::learners
