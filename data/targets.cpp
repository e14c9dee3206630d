// Incremental regression targets: rank-one updates of X^T X and X^T y per example.
#include "data/targets.hpp"

#include "core/errors.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace icl::data {

IncrementalRidge::IncrementalRidge(int d, double lambda)
    : d_(d),
      lambda_(lambda),
      xtx_(d, d, arma::fill::zeros),
      xty_(d, arma::fill::zeros),
      w_(d, arma::fill::zeros) {
  if (!(lambda >= 0) || !std::isfinite(lambda))
    throw core::InputError(
        "ridge", "ridge_lambda",
        "lambda must be a non-negative finite number, got " + std::to_string(lambda));
  xs_.set_size(d, 0);
}

void IncrementalRidge::Add(const double* xp, double y) {
  const arma::vec x(const_cast<double*>(xp), d_, /*copy_aux_mem=*/false, /*strict=*/true);
  xtx_ += x * x.t();
  xty_ += y * x;
  ++k_;
  if (degenerate_) {
    w_ = arma::pinv(xtx_ + lambda_ * arma::eye(d_, d_)) * xty_;
    return;
  }
  if (k_ <= d_) {
    // Border the dual inverse: [A b; b^T c]^{-1} with A = X X^T + lambda I, b = X x,
    // c = x.x + lambda, via the Schur complement s = c - b^T A^{-1} b (s >= lambda).
    const arma::vec b = xs_.t() * x;
    const double c = arma::dot(x, x) + lambda_;
    const arma::vec u = dual_inv_.n_rows ? arma::vec(dual_inv_ * b) : arma::vec();
    const double s = c - (u.n_elem ? arma::dot(b, u) : 0.0);
    xs_.insert_cols(xs_.n_cols, x);
    ys_.resize(k_);
    ys_(k_ - 1) = y;
    if (!(s > 1e-12 * std::max(c, 1e-300))) {
      // Only possible at lambda = 0: x lies in the span of the earlier examples.
      degenerate_ = true;
      w_ = arma::pinv(xtx_ + lambda_ * arma::eye(d_, d_)) * xty_;
      return;
    }
    const int m = k_ - 1;
    arma::mat g(k_, k_);
    if (m > 0) {
      g.submat(0, 0, m - 1, m - 1) = dual_inv_ + u * u.t() / s;
      g.submat(0, m, m - 1, m) = -u / s;
      g.submat(m, 0, m, m - 1) = -u.t() / s;
    }
    g(m, m) = 1.0 / s;
    dual_inv_ = std::move(g);
    w_ = xs_ * (dual_inv_ * ys_);
    if (k_ == d_) {
      // Switch to the primal form for the examples to come.
      if (!arma::inv_sympd(p_, xtx_ + lambda_ * arma::eye(d_, d_))) degenerate_ = true;
      xs_.reset();
      ys_.reset();
      dual_inv_.reset();
    }
    return;
  }
  // Sherman-Morrison: P' = P - P x x^T P / (1 + x^T P x).
  const arma::vec px = p_ * x;
  p_ -= px * px.t() / (1.0 + arma::dot(x, px));
  w_ = p_ * xty_;
}

void ComputePrefixTargets(const arma::mat& x, const arma::vec& y, double ridge_lambda,
                          PrefixTargets& out) {
  const int d = x.n_rows;
  const int n = x.n_cols;
  out.w_ols.set_size(d, n);
  out.w_ridge.set_size(d, n);
  out.xty.set_size(d, n);
  out.xtx.set_size(d, d, n);
  IncrementalRidge ols(d, 0.0);
  IncrementalRidge ridge(d, ridge_lambda);
  for (int j = 0; j < n; ++j) {
    ols.Add(x.colptr(j), y(j));
    ridge.Add(x.colptr(j), y(j));
    out.w_ols.col(j) = ols.weights();
    out.w_ridge.col(j) = ridge.weights();
    out.xty.col(j) = ols.xty();
    out.xtx.slice(j) = ols.xtx();
  }
}

TargetSet ComputeTargets(const PromptSet& set, double ridge_lambda) {
  const int d = set.task.d, n = set.task.n;
  const std::size_t count = set.size();
  TargetSet t;
  t.ridge_lambda = ridge_lambda;
  t.w_ols.set_size(d, n, count);
  t.w_ridge.set_size(d, n, count);
  t.xty.set_size(d, n, count);
  t.xtx.set_size(d * d, n, count);
  PrefixTargets p;
  for (std::size_t i = 0; i < count; ++i) {
    const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, n, false, true);
    const arma::vec y(const_cast<double*>(set.y.colptr(i)), n, false, true);
    ComputePrefixTargets(x, y, ridge_lambda, p);
    t.w_ols.slice(i) = p.w_ols;
    t.w_ridge.slice(i) = p.w_ridge;
    t.xty.slice(i) = p.xty;
    t.xtx.slice(i) = arma::reshape(arma::vectorise(p.xtx), d * d, n);
  }
  return t;
}

}  // namespace icl::data
