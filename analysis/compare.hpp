// Which learning algorithm does a learner match? Squared prediction difference (SPD) and
// implicit linear weight difference (ILWD) per number of examples k (docs/paper.md
// "Comparison metrics").
#pragma once

#include <armadillo>
#include <functional>
#include <string>
#include <vector>

#include "data/task.hpp"

namespace icl::analysis {

// Mean over prompts of (a - b)^2 / d per k, with a normal 95% interval. a, b: n x N predictions.
struct Curve {
  arma::vec mean, lo, hi;
};
Curve Spd(const arma::mat& a, const arma::mat& b, int d);

// Implicit weights of a black-box predictor: least squares (with an intercept, as the paper's
// released code) of its predictions yhat (Q) on the queries (d x Q); r2 says how linear it is.
struct ImplicitFit {
  arma::vec w;
  double intercept = 0;
  double r2 = 0;  // NaN when the predictions do not vary
};
ImplicitFit FitImplicitWeights(const arma::mat& queries, const arma::vec& yhat);

// ILWD(A, B) = E_D |w_A - w_B|^2 / d per k. w: d x n x P (weights after k = 0..n-1 examples).
arma::vec Ilwd(const arma::cube& wa, const arma::cube& wb);

// Seeded query points x' ~ N(0, I_d) for context `prompt` (independent of the prompt stream).
arma::mat QueryPoints(int d, int count, std::uint64_t seed, std::uint64_t prompt);

}  // namespace icl::analysis
