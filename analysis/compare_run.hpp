// The compare pipeline (iclprobe compare): learners under test against classical reference
// learners on the same seeded prompts: SPD and ILWD per k, and how linear each learner is
// (implicit-fit R2). One call returns the result; CSV writers and the summary print it.
#pragma once

#include <armadillo>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/compare.hpp"
#include "data/task.hpp"
#include "learners/classical.hpp"
#include "learners/transformer.hpp"

namespace icl::analysis {

// A learner under test, seen as a black box: its predictions on prompts, and its predictions of
// query points placed after the first k examples of one prompt.
struct LearnerUnderTest {
  std::string name;
  data::TaskConfig task;  // the prompts it is compared on (its training task, or overrides)
  // The task it was trained on: dmmse averages over its pool when `task` has none (a
  // pool-trained learner on fresh tasks, Raventos et al.'s measurement).
  data::TaskConfig trained;
  // n x N: entry (k, i) predicts y_{k+1} of prompt i from k examples.
  std::function<arma::mat(const data::PromptSet&)> predict;
  // Prompts first .. first + count - 1: queries d x Q x (count n) (slice c n + k: after k
  // examples of prompt first + c) -> Q x (count n) predictions.
  std::function<arma::mat(const data::PromptSet&, std::size_t first, std::size_t count,
                          const arma::cube& queries)>
      query;
};

// A transformer (kept alive by the returned object).
LearnerUnderTest TransformerUnderTest(const std::string& name, const data::TaskConfig& task,
                                      learners::Transformer model);
// A linear classical learner (ridge, OLS, GD, SGD), for known-answer checks of the pipeline.
LearnerUnderTest ClassicalUnderTest(const std::string& name, const data::TaskConfig& task,
                                    std::shared_ptr<const learners::ClassicalLearner> learner);

struct CompareRequest {
  std::string learner_specs = "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3";
  int prompts = 2000;
  std::uint64_t seed = 3;
  int queries = 0;  // per context for the implicit weights; 0 = 2(d + 1)
  int ilwd_prompts = 200;
  bool all_pairs = false;  // also every pair of reference learners (on the first task)
  int fit_prompts = 500;   // prompts (after the scored ones) on which fitted learners are fit
  // The prompts' task: d bounds the queries, the specs are checked against it (RunCompare
  // checks the request against the first learner's task).
  data::TaskConfig task;
  data::TaskConfig trained;  // the first learner's (LearnerUnderTest::trained)
  // Throws core::InputError naming the setting.
  void Validate() const;
};

struct CompareEntry {  // one row: learner under test (or reference A) against reference B
  std::string model, learner;
  Curve spd;       // per k, / d
  arma::vec ilwd;  // per k, / d; empty when B is not linear
  // n x N: (model - learner)^2 / d of every (k, prompt); empty for all-pairs rows.
  arma::mat spd_per_prompt;
  // Per prompt: SPD / d averaged over the summary window (CompareResult::summary_ks).
  arma::vec spd_prompt;
  // A fitted learner ("gd:fit", "newton:fit", "sgd:fit", "ridge:fit", "lasso:fit"): the
  // hyperparameter fitted to this model (alpha, C or lambda), the step count (gd, newton; 0
  // otherwise), the spec of the fitted member and its mean SPD / d on the fit prompts; NaN
  // otherwise.
  double fitted = arma::datum::nan, fit_spd = arma::datum::nan;
  int fitted_steps = 0;
  std::string fitted_spec;
  bool fit_at_bound = false;  // the fit ran into an end of a search range
  // ridge:fit and newton:fit, which reach OLS as lambda -> 0 or as the steps grow: SPD / d of the
  // fitted member against OLS on the scored prompts, averaged over the summary window (how far
  // the fit lies from the OLS limit, on the scale of the learner's own SPD); NaN otherwise.
  double member_ols_spd = arma::datum::nan;
};

struct CompareResult {
  int d = 0, n = 0, prompts = 0, contexts = 0, queries = 0, fit_prompts = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> models;        // learners under test, then (all pairs) references
  std::vector<data::TaskConfig> tasks;    // per learner under test
  std::vector<data::TaskConfig> trained;  // per learner under test: its training task
  std::vector<arma::mat> implicit_r2;     // per learner under test: n x contexts
  std::vector<CompareEntry> entries;
  // Per learner under test: the k that the one-number summary averages, SummaryWindow(d, n)
  // for every column.
  std::vector<std::vector<int>> summary_ks;
};

// The noisy-regime table with significance: per learner under test (column) and reference
// (row), the mean over prompts of the per-prompt summary SPD; the paired difference of each row
// from the column's diagonal learner (the ridge whose lambda is that column's sigma^2 / tau^2:
// `bayes`, `ridge:LAMBDA` or, noiseless, `ols`) with a 95% bootstrap interval over prompts; and
// whether the column minimum is significant (its paired interval against the runner-up excludes
// 0).
struct PairedCell {
  double mean = 0;                            // summary SPD / d
  double diff = 0, lo = 0, hi = 0;            // row - diagonal; NaN without a diagonal row
  bool minimum = false, significant = false;  // column minimum, and significantly so
};
struct PairedTable {
  std::vector<std::string> rows, columns;
  std::vector<std::string> diagonal;           // per column: its diagonal row ("" when none)
  std::vector<std::vector<PairedCell>> cells;  // [row][column]
  int replicates = 0;
};
PairedTable MakePairedTable(const CompareResult& r, int replicates = 1000);
// model,learner,spd_summary,diagonal,diff,diff_lo,diff_hi,minimum,significant
void WritePairedCsv(std::ostream& os, const PairedTable& t);

// A learner spec whose hyperparameters are fitted to each learner under test:
//   gd:fit           one GD step, its step size alpha
//   gd:fit:STEPS     STEPS steps, alpha
//   gd:fit:LO..HI    the number of steps (LO..HI) and alpha
//   newton:fit       newton:K:C (the fixed start Y_0 = C I), K in 1..30 and C
//   newton:fit:STEPS, newton:fit:LO..HI   the same with K fixed or in LO..HI
//   sgd:fit          one pass of SGD, alpha
//   ridge:fit        lambda
//   lasso:fit        lambda of lasso:LAMBDA (the sparse task's classical learner)
// Returns false for any other spec; throws core::InputError for a malformed fit spec.
struct FitSpec {
  std::string family;              // gd, newton, sgd, ridge, lasso
  int steps_lo = 1, steps_hi = 1;  // gd and newton: the step counts searched (equal: fixed)
  double lo = 0, hi = 0;           // search range of the continuous hyperparameter (log-uniform)
  // The ordinary spec with that value and step count, e.g. "gd:0.0213:3" or "newton:7:0.01".
  std::string Spec(double value, int steps) const;
  // What the continuous hyperparameter is called: alpha, lambda or C.
  std::string ValueName() const;
};
bool ParseFitSpec(const std::string& spec, FitSpec* out);
// Checks a comma-separated list of specs, fit specs included; throws core::InputError
// naming the first malformed one.
void CheckLearnerSpecs(const std::string& specs, const data::TaskConfig& task,
                       const data::TaskConfig* trained = nullptr);

// The member of a family closest to `target` (n x N predictions of a learner under test on
// `set`): the hyperparameters minimising the mean over prompts and `ks` of
// (target - learner)^2 / d. The continuous one is searched on a log-spaced grid over [lo, hi]
// (8 points a decade) jointly with every step count in [steps_lo, steps_hi] (one run of the
// longest gives every shorter one, StepPredictions), then refined by Brent's search in
// log(value) (parabolic steps, golden-section where a parabola fails) between the best grid
// point's neighbours, at each of the three step counts
// closest on the grid. Non-finite
// predictions (a diverging step size or start) count as infinitely far, and so does a member of
// two or more steps within 10% of divergence on some fit prompt (alpha lambda_max(X_k'X_k) >=
// 0.9, C lambda_max >= 1.8, k the largest of `ks`): the scored prompts' lambda_max can be larger.
struct FamilyFit {
  double value = 0, spd = 0;
  int steps = 1;
  bool at_bound = false;        // the best grid point was an end of the value's search range
  bool steps_at_bound = false;  // the step count was fitted and the best is its largest
};
// The grid stage of a fit that does not depend on the target: every grid point's predictions
// (ks x N x step counts) on the fit prompts and their largest curvature. The seeds of a cell
// share one (FitFamily's `shared`), so only the refinement is per seed; FitFamily gives the
// same fit with it as without. FamilyGridBytes: what one holds.
struct FamilyGrid {
  arma::vec grid;                       // log(value) of each grid point
  double curvature = 0;                 // the fit prompts' largest lambda_max(X_k'X_k)
  std::vector<arma::cube> predictions;  // per grid point: ks x N x (steps_hi - steps_lo + 1)
};
FamilyGrid MakeFamilyGrid(const FitSpec& spec, const data::PromptSet& set,
                          const std::vector<int>& ks);
std::size_t FamilyGridBytes(const FitSpec& spec, const data::PromptSet& set,
                            const std::vector<int>& ks);
FamilyFit FitFamily(const FitSpec& spec, const data::PromptSet& set, const arma::mat& target,
                    const std::vector<int>& ks, const FamilyGrid* shared = nullptr);

// The one summary window, fixed before any learner was scored: every k in 0..n-1 except d and
// d + 1, noiseless or not. Under noise minimum-norm OLS's SPD has no finite mean there;
// noiseless, OLS's error drops from its k < d value to 0 across them, and one such k decided
// verdicts that every other k contradicted.
std::vector<int> SummaryWindow(int d, int n);

// A row's learner with its fitted values, e.g. "gd:fit:1..8 (alpha 0.021, 3 steps)"; the spec
// itself for a learner that was not fitted.
std::string FittedName(const CompareEntry& e);

// Every learner under test must read prompts of d and n equal to the first one's.
CompareResult RunCompare(const std::vector<LearnerUnderTest>& learners,
                         const CompareRequest& request,
                         const std::function<void(long long done, long long total)>& progress = {});

// model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted,fitted_steps (the fitted hyperparameter and
// step count of gd:fit etc.)
void WriteCompareCsv(std::ostream& os, const CompareResult& r);
// model,k,r2,contexts (mean implicit-fit R2 over the contexts where it is defined)
void WriteLinearityCsv(std::ostream& os, const CompareResult& r);
// The human-readable summary iclprobe compare prints.
void PrintCompareSummary(std::ostream& os, const CompareResult& r,
                         const std::string& learner_specs);

}  // namespace icl::analysis
