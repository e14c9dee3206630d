// Per-k prediction error of in-context learners on a prompt set: the curve of the paper's
// figures (squared error divided by d, against the number of examples k).
#pragma once

#include <armadillo>
#include <ostream>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "learners/classical.hpp"

namespace icl::analysis {

// Mean over prompts per k with a normal 95% interval (mean +- 1.96 sd / sqrt(N)).
struct ErrorCurve {
  std::string learner;
  arma::vec mean, lo, hi;  // index k = 0..n-1
};
ErrorCurve Summarize(const std::string& learner, const arma::mat& per_prompt_errors);

// Each learner's per-prompt errors, summarised; throws core::InputError (setting "learners")
// for a learner whose predictions are NaN or infinite on some prompt.
std::vector<ErrorCurve> EvaluateLearners(
    const data::PromptSet& set,
    const std::vector<std::unique_ptr<learners::ClassicalLearner>>& learners);

// Tidy CSV: learner,k,error,error_lo,error_hi (one row per learner and k).
void WriteErrorCsv(std::ostream& os, const std::vector<ErrorCurve>& curves);
// Fixed-width table: one row per k, one column per learner, the best learner per k marked '*'.
void PrintErrorTable(std::ostream& os, const std::vector<ErrorCurve>& curves);

}  // namespace icl::analysis
