// compare's verdicts: which reference learner a learner under test, or a cell of learners
// that differ only by training seed, is closest to at every k and over the summary window, by
// how much (the paired margin to the runner-up) and how surely (a two-stage bootstrap: seeds,
// then prompts within a seed), and whether every seed agrees.
#pragma once

#include <armadillo>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/compare_run.hpp"
#include "analysis/report.hpp"

namespace icl::analysis {

// Learners under test (CompareResult::models) that are one cell of an experiment: the same
// recipe and task, different training seeds. A single checkpoint is a cell of one.
struct Cell {
  std::string name;
  std::vector<std::string> models;
  // What the excess-error curves over the training budget of the cell's runs say
  // (learners/budget_curve.hpp; one seed with shorter budgets is enough): "falling" (every
  // doubling lowers the excess), "plateau" (some doubling does not) or "untested" (no shorter
  // budget). Verdicts files written before the curves hold the old rule's "yes"/"no" here.
  std::string budget_curve = "untested";
};

struct Verdict {
  std::string cell;
  int k = -1;  // -1: the mean over the summary window
  int seeds = 0;
  std::string closest, runner_up;  // by the mean over seeds and prompts of SPD / d
  double closest_spd = arma::datum::nan, runner_up_spd = arma::datum::nan;
  // runner_up - closest, with its 95% interval over seeds and prompts (paired: the same
  // resamples for both learners).
  double margin = arma::datum::nan, lo = arma::datum::nan, hi = arma::datum::nan;
  bool significant = false;               // lo > 0
  bool stable = false;                    // every seed's own closest learner is `closest`
  std::vector<std::string> per_seed;      // each seed's closest learner, in the cell's order
  std::string budget_curve = "untested";  // the cell's (Cell::budget_curve)

  // The separation rule (docs/methodology.md, "Verdicts"). The ratio SPD(B) / SPD(A) of the
  // closest learner A and the nearest learner B that A's family does not nest is about
  // 1 + SPD(A, B) / SPD(M, A): it separates two candidates only when they differ by more than
  // the learner's own residual. "Follows A, not B" needs ratio >= kSeparationRatio, the lower
  // end of its 95% interval above 1 and every seed's own ratio above 1; with three or more
  // seeds the interval is the two-stage bootstrap (seeds, then prompts), with one or two it is
  // over the prompts alone (pooled) and the verdict is labelled "one seed" / "two seeds".
  double ratio = arma::datum::nan, ratio_lo = arma::datum::nan, ratio_hi = arma::datum::nan;
  std::vector<double> seed_ratios;  // each seed's own SPD(B) / SPD(A)
  std::string separated_from;       // B: the nearest learner outside A's family
  bool resolved = false;
  // A first, then every learner the rule does not separate from A. Learners nested with A (as
  // ridge:fit and newton:fit contain OLS) never decide the verdict: B is the nearest learner
  // outside A's family, and "follows A" may list nested learners tied with A.
  std::vector<std::string> among;
  std::string basis;  // "seeds" (three or more), "one seed", "two seeds"
};

inline constexpr double kSeparationRatio = 2.0;

// True when one of two learner specs contains the other as a limit, so that a ratio of their
// SPDs cannot separate them: ols, ridge:fit and newton:fit (OLS as lambda -> 0 or as the steps
// grow), and a fitted gd or sgd family against a fixed member of it.
bool Nested(const std::string& a, const std::string& b);

// SPD / d per k of one reference learner against a cell: mean over seeds and prompts, with the
// two-stage 95% interval.
struct CellCurve {
  std::string cell, learner;
  int seeds = 0;
  arma::vec mean, lo, hi;  // n
};

// A fitted family that reaches OLS (ridge:fit as lambda -> 0, newton:fit as its steps grow) over
// the seeds of a cell. A ratio cannot separate it from OLS, so its fitted parameter says which
// it is: the parameter's geometric mean over the seeds with a 95% interval (Student t on the log
// of the value with three or more seeds; the smallest and largest seed's value with one or two),
// and "OLS-like" when in every seed the fitted member lies nearer OLS than the learner lies to
// the member (SPD / d over the summary window): the fit's departure from the OLS limit is then
// smaller than the learner's own residual, which is all a comparison can resolve.
struct FittedParameter {
  std::string cell, learner, name;  // name: the value's (FitSpec::ValueName: lambda, C)
  int seeds = 0;
  std::vector<double> per_seed;  // each seed's fitted value, in the cell's order
  std::vector<int> steps;        // newton: each seed's fitted step count; empty for ridge
  double center = arma::datum::nan, lo = arma::datum::nan, hi = arma::datum::nan;
  std::string basis;                             // "seeds" (three or more), "one seed", "two seeds"
  double member_ols_spd = arma::datum::nan;      // largest over seeds: fitted member vs OLS
  double learner_member_spd = arma::datum::nan;  // smallest over seeds: learner vs its member
  bool ols_like = false;
};

struct CellAnalysis {
  std::vector<Verdict> verdicts;        // per cell: k = 0..n-1, then the window (k = -1)
  std::vector<CellCurve> curves;        // per cell and reference learner
  std::vector<FittedParameter> fitted;  // per cell and fitted learner that reaches OLS
  std::vector<int> window;
  int replicates = 0;
};

// Checks the cells against `r` (every model named exists, belongs to one cell, and the models
// of a cell were compared on the same task) and computes their verdicts and curves. A learner
// whose SPD is not finite for some prompt at a k takes no part in that k's ranking. Throws
// core::InputError (setting "cells").
CellAnalysis AnalyseCells(const CompareResult& r, const std::vector<Cell>& cells,
                          int replicates = 1000);
// Every learner under test as a cell of its own.
std::vector<Cell> SingleCells(const CompareResult& r);

// cell,scope,k,seeds,closest,closest_spd,runner_up,runner_up_spd,margin,margin_lo,margin_hi,
// significant,stable,per_seed,budget_curve,separated_from,ratio,ratio_lo,ratio_hi,seed_ratios,
// resolved,among,basis (scope: k or window; per_seed: each seed's closest, ';'-joined;
// budget_curve: falling, plateau or untested; among: ';'-joined; resolved: 1 or 0)
void WriteVerdictsCsv(std::ostream& os, const CellAnalysis& a);
// cell,learner,k,seeds,spd,spd_lo,spd_hi
void WriteCellCurvesCsv(std::ostream& os, const CellAnalysis& a);
// cell,learner,parameter,seeds,per_seed,steps,center,lo,hi,basis,member_ols_spd,
// learner_member_spd,ols_like (per_seed, steps: ';'-joined; ols_like: 1 or 0)
void WriteFittedCsv(std::ostream& os, const CellAnalysis& a);
// Per cell: the fitted parameters of the families that reach OLS, the window's verdict, then one
// line per k.
void PrintVerdicts(std::ostream& os, const CellAnalysis& a);
// A cell's verdicts against those of a shorter training budget of its runs, compared as a cell
// of its own on the same prompts: does the answer depend on training length? Per k and over the
// window: the two closest learners, and the k at which they differ.
struct BudgetAgreement {
  std::string cell, short_cell;
  std::string closest, short_closest;                   // over the window
  bool significant = false, short_significant = false;  // each window verdict's margin
  int ks = 0;                           // k compared: those with a closest learner in both
  std::vector<int> differ;              // the k whose closest learners differ
  std::vector<int> differ_significant;  // ... where both verdicts are significant
  // The window's closest learners differ, are not of one family (Nested), and the separation
  // rule resolves at least one of the two verdicts: the answer depends on the training budget (a
  // phenomenon, not an error), so neither is the recipe's answer.
  bool changes_with_training = false;
};
// `pairs`: (cell, its shorter budget's cell), both analysed in `a`. Throws std::invalid_argument
// when a name is not a cell of `a`.
std::vector<BudgetAgreement> CompareWithShorterBudgets(
    const CellAnalysis& a, const std::vector<std::pair<std::string, std::string>>& pairs);
void PrintBudgetAgreement(std::ostream& os, const std::vector<BudgetAgreement>& h);

// A figure per cell: SPD / d per k of every reference learner, log scale, 95% intervals over
// seeds and prompts (PNG and SVG).
PlotFiles PlanCellPlots(const CellAnalysis& a);

}  // namespace icl::analysis
