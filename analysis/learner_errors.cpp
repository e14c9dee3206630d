// Learner error curves, their CSV and their table.
#include "analysis/learner_errors.hpp"

#include <fmt/format.h>
#include <cmath>

#include "core/errors.hpp"

namespace icl::analysis {

ErrorCurve Summarize(const std::string& learner, const arma::mat& e) {
  ErrorCurve c;
  c.learner = learner;
  c.mean = arma::mean(e, 1);
  const arma::vec sd =
      e.n_cols > 1 ? arma::vec(arma::stddev(e, 0, 1)) : arma::vec(e.n_rows, arma::fill::zeros);
  const arma::vec half = 1.96 * sd / std::sqrt(static_cast<double>(e.n_cols));
  c.lo = c.mean - half;
  c.hi = c.mean + half;
  return c;
}

std::vector<ErrorCurve> EvaluateLearners(
    const data::PromptSet& set,
    const std::vector<std::unique_ptr<learners::ClassicalLearner>>& learners) {
  std::vector<ErrorCurve> curves;
  for (const auto& l : learners) {
    const arma::mat e = learners::PerPromptErrors(set, *l);
    // A learner whose iteration overflows on some prompts has no mean error to report (the
    // table would print -nan, or a number that is only rounding).
    if (!e.is_finite()) {
      arma::uword bad = 0;
      for (arma::uword i = 0; i < e.n_cols; ++i)
        bad += e.col(i).is_finite() ? 0 : 1;
      throw core::InputError(
          "learners", "learners",
          fmt::format("{} predicts NaN or infinite values on {} of {} prompts (its iteration "
                      "diverges there: newton:K:C needs C < 2 / lambda_max(X'X + lambda I), "
                      "gd:ALPHA:K needs ALPHA < 1 / lambda_max(X'X)); choose a smaller step or "
                      "start",
                      l->spec(), bad, e.n_cols));
    }
    curves.push_back(Summarize(l->spec(), e));
  }
  return curves;
}

void WriteErrorCsv(std::ostream& os, const std::vector<ErrorCurve>& curves) {
  os << "learner,k,error,error_lo,error_hi\n";
  for (const auto& c : curves)
    for (arma::uword k = 0; k < c.mean.n_elem; ++k)
      os << fmt::format("{},{},{:.9g},{:.9g},{:.9g}\n", c.learner, k, c.mean(k), c.lo(k), c.hi(k));
}

void PrintErrorTable(std::ostream& os, const std::vector<ErrorCurve>& curves) {
  if (curves.empty()) return;
  std::size_t width = 10;
  for (const auto& c : curves)
    width = std::max(width, c.learner.size() + 2);
  os << fmt::format("{:>4}", "k");
  for (const auto& c : curves)
    os << fmt::format("{:>{}}", c.learner, width + 1);
  os << "\n";
  for (arma::uword k = 0; k < curves[0].mean.n_elem; ++k) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < curves.size(); ++j)
      if (curves[j].mean(k) < curves[best].mean(k)) best = j;
    os << fmt::format("{:>4}", k);
    for (std::size_t j = 0; j < curves.size(); ++j)
      os << fmt::format("{:>{}.4f}{}", curves[j].mean(k), width, j == best ? '*' : ' ');
    os << "\n";
  }
  os << "error = mean squared prediction error / d over prompts; * = lowest at that k\n";
}

}  // namespace icl::analysis
