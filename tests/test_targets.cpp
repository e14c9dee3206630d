// Regression targets after k examples: incremental updates against direct recomputation.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/targets.hpp"

using namespace icl::data;

namespace {

PromptSet Prompts(int d, int n, double noise, std::size_t count, std::uint64_t seed = 11) {
  TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  return SamplePrompts(t, seed, 0, count);
}

double RelErr(const arma::mat& a, const arma::mat& b) {
  return arma::norm(a - b, "fro") / std::max(1.0, arma::norm(b, "fro"));
}

}  // namespace

TEST(Targets, IncrementalEqualsDirectForEveryPrefix) {
  const int d = 5, n = 14;
  const double lambda = 0.3;
  const PromptSet s = Prompts(d, n, 0.4, 20);
  const TargetSet t = ComputeTargets(s, lambda);
  for (std::size_t i = 0; i < s.size(); ++i) {
    for (int k = 1; k <= n; ++k) {
      const arma::mat xk = s.x.slice(i).cols(0, k - 1).t();  // k x d
      const arma::vec yk = s.y.col(i).head(k);
      const arma::mat xtx = xk.t() * xk;
      const arma::vec xty = xk.t() * yk;
      // Short double sums (k <= 14 products of O(1) numbers, in another order than BLAS):
      // relative error <= ~k * eps = 3e-15.
      EXPECT_LT(RelErr(t.xty.slice(i).col(k - 1), xty), 1e-12);
      EXPECT_LT(RelErr(arma::reshape(t.xtx.slice(i).col(k - 1), d, d), xtx), 1e-12);
      // Double precision, condition-aware: the incremental solver works with X^T X
      // (Sherman-Morrison) or X X^T (bordered dual inverse), so its forward error is about
      // k * cond(X_k)^2 * eps (eps = 2.2e-16); pinv is backward stable. Allow 100x that bound,
      // never less than 1e-8 (which alone is 100x the bound up to cond(X_k) ~ 180).
      const double cond = arma::cond(xk);
      const double ols_tol = std::max(1e-8, 100.0 * k * cond * cond * arma::datum::eps);
      EXPECT_LT(RelErr(t.w_ols.slice(i).col(k - 1), arma::pinv(xk) * yk), ols_tol)
          << "k=" << k << " cond=" << cond;
      const arma::vec ridge = arma::solve(xtx + lambda * arma::eye(d, d), xty);
      // lambda = 0.3 bounds cond(X_k^T X_k + lambda I) <= 1 + s_max^2 / lambda, ~1 + 40 / 0.3 for
      // these d = 5, k <= 14 Gaussian prompts: error ~ k * 130 * eps ~ 4e-13, 1e-9 is >1000x that.
      EXPECT_LT(RelErr(t.w_ridge.slice(i).col(k - 1), ridge), 1e-9) << "k=" << k;
    }
  }
}

TEST(Targets, OlsIsMinimumNormBelowDAndExactFromD) {
  // Hand-sized example: 2 examples in d = 3; the min-norm solution lies in the row space.
  arma::mat x = {{1, 0}, {2, 1}, {0, 3}};  // d x k, column j = x_j
  arma::vec y = {1, 2};
  IncrementalOls ols(3);
  ols.Add(x.colptr(0), y(0));
  ols.Add(x.colptr(1), y(1));
  const arma::vec expected = arma::pinv(x.t()) * y;
  EXPECT_LT(arma::norm(ols.weights() - expected), 1e-12);
  EXPECT_LT(arma::norm(x.t() * ols.weights() - y), 1e-12);  // interpolates

  // Noiseless data: from k = d on, OLS recovers w exactly.
  const PromptSet s = Prompts(6, 10, 0.0, 30);
  const TargetSet t = ComputeTargets(s, 0.0);
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int k = 6; k <= 10; ++k) {
      // Noiseless, so only rounding: ~k * cond(X_k)^2 * eps * |w| (normal-equation form, see
      // above). Allow 100x that, never less than the absolute 1e-8.
      const double cond = arma::cond(arma::mat(s.x.slice(i).cols(0, k - 1)));
      const double w = arma::norm(s.w.col(i));
      EXPECT_LT(arma::norm(t.w_ols.slice(i).col(k - 1) - s.w.col(i)),
                std::max(1e-8, 100.0 * k * cond * cond * arma::datum::eps * w))
          << "prompt " << i << " k=" << k << " cond=" << cond;
    }
}

TEST(Targets, RidgeApproachesOlsAsLambdaShrinks) {
  // w_ols - w_ridge = lambda (X^T X + lambda I)^{-1} w_ols on the row space of X, so
  // |w_ols - w_ridge| <= lambda / s_min^2 |w_ols| with s_min the smallest non-zero singular
  // value of X_k: the closed-form bound, checked at every k including k < d.
  const PromptSet s = Prompts(4, 9, 0.2, 30);
  const TargetSet ols = ComputeTargets(s, 0.0);
  for (double lambda : {1e-2, 1e-5, 1e-8}) {
    const TargetSet r = ComputeTargets(s, lambda);
    // Exact by construction: w_ols comes from the same IncrementalRidge(d, 0) code on the same
    // inputs in both calls; lambda only feeds the separate ridge solver.
    EXPECT_EQ(arma::abs(r.w_ols - ols.w_ols).max(), 0.0);
    for (std::size_t i = 0; i < s.size(); ++i)
      for (int k = 1; k <= 9; ++k) {
        const arma::vec sv = arma::svd(arma::mat(s.x.slice(i).cols(0, k - 1)));
        const double smin2 = std::pow(sv(std::min(k, 4) - 1), 2);
        const double w = arma::norm(ols.w_ols.slice(i).col(k - 1));
        // Slack for rounding, condition-aware: each incremental solve is off by
        // ~k * eps * (s_max / s_min)^2 * w (normal-equation form); allow 100x that for the two,
        // never less than the former absolute slack 1e-9 * w.
        const double slack =
            std::max(1e-9, 100.0 * k * arma::datum::eps * sv(0) * sv(0) / smin2) * w;
        EXPECT_LE(arma::norm(r.w_ridge.slice(i).col(k - 1) - ols.w_ols.slice(i).col(k - 1)),
                  (lambda / smin2) * w + slack)
            << "lambda=" << lambda << " prompt " << i << " k=" << k;
      }
  }
  // lambda = 0 is OLS itself. Exact by construction: both are IncrementalRidge(d, 0) on the same
  // inputs in the same process.
  EXPECT_EQ(arma::abs(ols.w_ridge - ols.w_ols).max(), 0.0);
}

TEST(Targets, RepeatedExamplesFallBackToPseudoInverse) {
  arma::mat x = {{1, 1, 0}, {0, 0, 1}, {1, 1, 1}};  // x_1 == x_2
  arma::vec y = {2, 2, 1};
  IncrementalOls ols(3);
  for (int j = 0; j < 3; ++j)
    ols.Add(x.colptr(j), y(j));
  const arma::mat xk = x.t();
  EXPECT_LT(arma::norm(ols.weights() - arma::pinv(xk) * y), 1e-10);
}

TEST(Targets, NegativeLambdaIsRefused) {
  EXPECT_THROW(IncrementalRidge(3, -1.0), std::invalid_argument);
}
