// Adequacy of a learner's training budget as a curve: its excess error over the task's
// Bayes-optimal predictor at several budgets of one recipe and seed, and the power law
// e(T) = a T^(-b) fitted to it, with an interval on b and the excess extrapolated to 4T.
//
// The excess of a predictor f over the Bayes predictor f* (the posterior mean of y) under squared
// loss is E[(f - y)^2] - E[(f* - y)^2] = E[(f - f*)^2]: the cross term vanishes because f* is the
// conditional mean. It is measured as the mean squared prediction difference to f* on the same
// prompts (no label noise in the estimate), divided by d. f* is `bayes` (learners/classical.hpp):
// ridge with lambda = sigma^2 / tau^2, minimum-norm OLS when sigma = 0. A consistent learner's
// excess vanishes as T grows, so the law has no constant: log e = log a - b log T, a line.
#pragma once

#include <armadillo>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "learners/checkpoint.hpp"

namespace icl::learners {

// "" when `shorter` is a shorter budget of `longest`'s recipe and seed: the same model and
// training configuration (seed included) except shards, save_every, eval_every, steps and
// warmup, with steps = T / 2^j for some j >= 1 and the warmup scaled by the same factor (rounded
// down); otherwise what differs, e.g. "train_config steps: 30000 is not T/2^j of 80000".
std::string ShorterBudgetMismatch(const CheckpointInfo& longest, const CheckpointInfo& shorter);

struct BudgetPoint {
  std::int64_t steps = 0;
  std::string path;
  double excess = 0, lo = 0, hi = 0;  // mean over prompts and the window's k, 95% interval
};

struct BudgetCurve {
  std::string recipe;  // the longest run's path
  std::vector<int> window;
  int prompts = 0;
  std::uint64_t prompt_seed = 0;
  std::vector<BudgetPoint> points;  // ascending steps
  // Paired change of the excess from each budget to the next (prompts resampled together):
  // falls[j] when the upper end of the 95% interval of e(T_{j+1}) - e(T_j) is below 0.
  std::vector<double> change, change_lo, change_hi;
  std::vector<bool> falls;
  // A plateau: the excess does not fall at some doubling (the first such budget's steps); no
  // law is fitted then, since a power law with no constant cannot describe it.
  bool plateau = false;
  std::int64_t plateau_at = 0;
  // The fit (when not a plateau): b with its 95% interval, which needs three or more budgets
  // (NaN with two); a; the excess extrapolated to 4T with its interval.
  double b = arma::datum::nan, b_lo = arma::datum::nan, b_hi = arma::datum::nan;
  double a = arma::datum::nan;
  double at_4t = arma::datum::nan, at_4t_lo = arma::datum::nan, at_4t_hi = arma::datum::nan;
};

// The curve from the per-prompt excess at each budget: `steps` ascending (two or more), and
// `excess` (budgets x prompts, paired by prompt: entry (j, i) is prompt i's mean excess over the
// window at budget j). The log-log line is fitted by least squares; b's interval combines the
// line's residual variance (Student t with m - 2 degrees of freedom) with each point's sampling
// error over the prompts (the delta method: var(log e) = var(e) / e^2). Throws
// std::invalid_argument when the sizes disagree, steps do not ascend or fewer than two budgets.
BudgetCurve FitBudgetCurve(const std::vector<std::int64_t>& steps, const arma::mat& excess);

// Runs the budgets of one recipe and seed (`runs`, any order: the longest is T, every other a
// ShorterBudgetMismatch-free shorter budget of it) on the longest run's evaluation prompts, takes
// each one's excess over the task's `bayes` learner averaged over the `window`'s k, and fits the
// curve. Throws core::InputError naming the checkpoint at fault (a run of another recipe or seed,
// a budget that is not T/2^j, two runs of one budget) or the window (empty, or a k >= n).
BudgetCurve MeasureBudgetCurve(const std::vector<CheckpointInfo>& runs,
                               const std::vector<int>& window);

// The budget curves of a run: each run in `compared` with the `budgets` that are shorter budgets
// of its recipe and seed (ShorterBudgetMismatch), shortest first and the run last; runs with no
// budget are left out. Throws core::InputError naming the budget file (setting `field`) that
// belongs to no compared run, or whose budget another file of the same run already gives.
std::vector<std::vector<CheckpointInfo>> GroupBudgets(const std::vector<CheckpointInfo>& compared,
                                                      const std::vector<CheckpointInfo>& budgets,
                                                      const std::string& field = "budgets");

// One line: "excess over Bayes falls as T^-b, b = 0.52 [0.31, 0.73]; at 4T: 1.2e-4 [...]
// (basis)" or "no power law: plateau (the excess does not fall from ... to ... steps)".
std::string BudgetCurveSummary(const BudgetCurve& c);
// The table, one line per budget and per change, then the summary; for a terminal.
void PrintBudgetCurve(std::ostream& os, const BudgetCurve& c);
// recipe,steps,checkpoint,excess,excess_lo,excess_hi,change,change_lo,change_hi,falls (the
// change columns: from the previous budget, empty on the first), one row per budget.
void WriteBudgetCurveCsv(std::ostream& os, const std::vector<BudgetCurve>& curves);
// recipe,budgets,plateau,plateau_at,b,b_lo,b_hi,a,excess_at_4t,excess_at_4t_lo,excess_at_4t_hi
void WriteBudgetFitCsv(std::ostream& os, const std::vector<BudgetCurve>& curves);

}  // namespace icl::learners
