// Regression targets after k examples (k = 1..n): w_ols (minimum norm), w_ridge(lambda),
// the moment vector X_k^T y_k and the moment matrix X_k^T X_k, computed incrementally.
#pragma once

#include <armadillo>

#include "data/task.hpp"

namespace icl::data {

// Ridge regression w = (X^T X + lambda I)^{-1} X^T y after each example; lambda = 0 gives the
// minimum-norm least-squares solution, the lambda -> 0 limit. Here X is k x d (one row per
// example).
//   k <= d: dual form w = X^T (X X^T + lambda I)^{-1} y, the k x k inverse grown by bordering
//           (O(k^2) per example; well conditioned for any lambda, exact min-norm at lambda = 0);
//   k = d:  P = (X^T X + lambda I)^{-1} once;
//   k > d:  Sherman-Morrison updates of P (O(d^2) per example).
// Starting Sherman-Morrison from P = I / lambda would be simpler but loses all precision for
// small lambda; the dual form avoids that.
class IncrementalRidge {
 public:
  IncrementalRidge(int d, double lambda);
  void Add(const double* x, double y);
  int num_examples() const { return k_; }
  const arma::mat& xtx() const { return xtx_; }  // X^T X
  const arma::vec& xty() const { return xty_; }  // X^T y
  const arma::vec& weights() const { return w_; }

 private:
  int d_;
  double lambda_;
  int k_ = 0;
  bool degenerate_ = false;  // lambda = 0 and an example fell in the span of earlier ones: pinv
  arma::mat xtx_;
  arma::vec xty_;
  arma::vec w_;
  arma::mat xs_;        // d x k: examples so far, while k <= d
  arma::vec ys_;        // their y
  arma::mat dual_inv_;  // (X X^T + lambda I)^{-1}, k x k, while k <= d
  arma::mat p_;         // (X^T X + lambda I)^{-1}, once k >= d
};

// Minimum-norm least squares: ridge at lambda = 0.
class IncrementalOls : public IncrementalRidge {
 public:
  explicit IncrementalOls(int d) : IncrementalRidge(d, 0.0) {}
};

// Targets of one prompt; column (or slice) k-1 holds the value after k examples.
struct PrefixTargets {
  arma::mat w_ols;    // d x n
  arma::mat w_ridge;  // d x n
  arma::mat xty;      // d x n
  arma::cube xtx;     // d x d x n
};

// x: d x n (column j = x_j), y: n.
void ComputePrefixTargets(const arma::mat& x, const arma::vec& y, double ridge_lambda,
                          PrefixTargets& out);

// Targets of a whole prompt set, laid out like the HDF5 datasets of docs/design.md
// "activations.h5": w_ols, w_ridge, xty are d x n x N (== [N, n, d]); xtx is (d*d) x n x N
// (== [N, n, d, d]).
struct TargetSet {
  double ridge_lambda = 0.0;
  arma::cube w_ols, w_ridge, xty, xtx;
};
TargetSet ComputeTargets(const PromptSet& set, double ridge_lambda);

}  // namespace icl::data
