// SPD, implicit weights and ILWD.
#include "analysis/compare.hpp"

#include "analysis/learner_errors.hpp"

#include <cmath>
#include <stdexcept>

namespace icl::analysis {

Curve Spd(const arma::mat& a, const arma::mat& b, int d) {
  if (a.n_rows != b.n_rows || a.n_cols != b.n_cols)
    throw std::logic_error("spd: prediction shapes differ");
  // The same per-k mean and normal 95% interval over prompts as the error curves.
  const ErrorCurve e = Summarize("", arma::square(a - b) / d);
  return Curve{e.mean, e.lo, e.hi};
}

ImplicitFit FitImplicitWeights(const arma::mat& queries, const arma::vec& yhat) {
  const arma::uword d = queries.n_rows, q = queries.n_cols;
  if (q < d + 1) throw std::logic_error("implicit weights: need at least d+1 queries");
  const arma::mat design = arma::join_cols(arma::ones<arma::rowvec>(q), queries).t();  // Q x (d+1)
  const arma::vec coef = arma::solve(design, yhat);
  ImplicitFit f;
  f.intercept = coef(0);
  f.w = coef.tail(d);
  const double sst = arma::accu(arma::square(yhat - arma::mean(yhat)));
  const double sse = arma::accu(arma::square(yhat - design * coef));
  f.r2 = sst > 1e-12 * std::max(1.0, arma::accu(arma::square(yhat))) ? 1.0 - sse / sst
                                                                     : arma::datum::nan;
  return f;
}

arma::vec Ilwd(const arma::cube& wa, const arma::cube& wb) {
  if (arma::size(wa) != arma::size(wb)) throw std::logic_error("ilwd: weight shapes differ");
  const double d = wa.n_rows;
  arma::vec out(wa.n_cols, arma::fill::zeros);
  for (arma::uword p = 0; p < wa.n_slices; ++p)
    out += arma::sum(arma::square(wa.slice(p) - wb.slice(p)), 0).t();
  return out / (double(wa.n_slices) * d);
}

arma::mat QueryPoints(int d, int count, std::uint64_t seed, std::uint64_t prompt) {
  data::Rng rng(seed ^ 0x9e3779b97f4a7c15ULL, prompt);
  arma::mat q(d, count);
  for (double& v : q)
    v = rng.Normal();
  return q;
}

}  // namespace icl::analysis
