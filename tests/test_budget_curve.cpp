// The excess-error curve over training budgets: the power-law fit on planted curves, the
// plateau rule, and which checkpoints count as shorter budgets of one recipe and seed.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "learners/budget_curve.hpp"

namespace {

using icl::learners::BudgetCurve;
using icl::learners::CheckpointInfo;
using icl::learners::FitBudgetCurve;

// Per-prompt excess a T^-b u_i with one positive factor u_i per prompt for every budget: the
// mean over prompts is exactly a mean(u) T^-b, so the log-log line has no residual.
arma::mat Planted(const std::vector<std::int64_t>& steps, double a, double b,
                  const arma::rowvec& u) {
  arma::mat e(steps.size(), u.n_elem);
  for (std::size_t j = 0; j < steps.size(); ++j)
    e.row(j) = a * std::pow(static_cast<double>(steps[j]), -b) * u;
  return e;
}

TEST(BudgetCurve, RecoversAPlantedExponentAndExtrapolatesIt) {
  arma::arma_rng::set_seed(3);
  const arma::rowvec u = 0.5 + arma::randu<arma::rowvec>(400);
  const std::vector<std::int64_t> steps = {5000, 10000, 20000, 40000};
  const double a = 2.0, b = 0.7;
  const BudgetCurve c = FitBudgetCurve(steps, Planted(steps, a, b, u));
  ASSERT_FALSE(c.plateau);
  // Logs of four numbers and a 4-point least-squares line: rounding of ~1e-15 relative.
  EXPECT_NEAR(c.b, b, 1e-12);
  EXPECT_NEAR(c.a / (a * arma::mean(u)), 1.0, 1e-12);
  EXPECT_NEAR(c.at_4t / (a * arma::mean(u) * std::pow(160000.0, -b)), 1.0, 1e-12);
  // No residual: the interval is the prompts' sampling error alone, which every budget shares
  // (relative standard error sd(u) / mean(u) / sqrt(N)); it must contain b and be narrow.
  EXPECT_LT(c.b_lo, b);
  EXPECT_GT(c.b_hi, b);
  const double rel_se = arma::stddev(u) / arma::mean(u) / std::sqrt(400.0);
  // b's sampling variance is rel_se^2 * sum_j c_j^2 = rel_se^2 / Sxx (t with 2 degrees of freedom).
  double sxx = 0, mean_x = 0;
  for (auto s : steps)
    mean_x += std::log(double(s)) / 4;
  for (auto s : steps)
    sxx += std::pow(std::log(double(s)) - mean_x, 2);
  EXPECT_NEAR(c.b_hi - b, 4.303 * rel_se / std::sqrt(sxx), 1e-9);
  for (bool f : c.falls)
    EXPECT_TRUE(f);
}

TEST(BudgetCurve, ResidualScatterWidensTheInterval) {
  arma::arma_rng::set_seed(4);
  const arma::rowvec u = 0.5 + arma::randu<arma::rowvec>(400);
  const std::vector<std::int64_t> steps = {5000, 10000, 20000};
  arma::mat e = Planted(steps, 1.0, 0.5, u);
  e.row(1) *= 1.2;  // off the line, still falling at every doubling
  const BudgetCurve c = FitBudgetCurve(steps, e);
  ASSERT_FALSE(c.plateau);
  // Three points leave one degree of freedom: t = 12.706 times the residual's standard error.
  EXPECT_GT(c.b_hi - c.b_lo, 1.0);
  EXPECT_LT(c.b_lo, 0.5);
  EXPECT_GT(c.b_hi, 0.5);
}

TEST(BudgetCurve, AnExcessThatStopsFallingIsAPlateauAndIsNotFitted) {
  arma::arma_rng::set_seed(5);
  const arma::rowvec u = 0.5 + arma::randu<arma::rowvec>(400);
  const std::vector<std::int64_t> steps = {10000, 20000, 40000, 80000};
  arma::mat e = Planted(steps, 1.0, 0.5, u);
  e.row(3) = e.row(2) * 1.05;  // worse with more steps, as a capacity-limited learner can be
  const BudgetCurve c = FitBudgetCurve(steps, e);
  EXPECT_TRUE(c.plateau);
  EXPECT_EQ(c.plateau_at, 80000);
  EXPECT_TRUE(std::isnan(c.b));
  ASSERT_EQ(c.falls.size(), 3u);
  EXPECT_TRUE(c.falls[0] && c.falls[1]);
  EXPECT_FALSE(c.falls[2]);
  EXPECT_NE(icl::learners::BudgetCurveSummary(c).find("no power law: plateau"), std::string::npos);
}

TEST(BudgetCurve, TwoBudgetsGiveAnExponentWithoutAnInterval) {
  const arma::rowvec u = arma::linspace<arma::rowvec>(0.5, 1.5, 100);
  const std::vector<std::int64_t> steps = {10000, 20000};
  const BudgetCurve c = FitBudgetCurve(steps, Planted(steps, 1.0, 1.0, u));
  EXPECT_NEAR(c.b, 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(c.b_lo) && std::isnan(c.b_hi));
  EXPECT_NE(icl::learners::BudgetCurveSummary(c).find("no interval: two budgets"),
            std::string::npos);
}

TEST(BudgetCurve, RefusesAMalformedCurve) {
  const arma::rowvec u = arma::linspace<arma::rowvec>(0.5, 1.5, 10);
  EXPECT_THROW(FitBudgetCurve({10000}, Planted({10000}, 1, 1, u)), std::invalid_argument);
  EXPECT_THROW(FitBudgetCurve({20000, 10000}, Planted({20000, 10000}, 1, 1, u)),
               std::invalid_argument);
  EXPECT_THROW(FitBudgetCurve({10000, 20000}, arma::mat(3, 10, arma::fill::ones)),
               std::invalid_argument);
}

CheckpointInfo RunInfo(const std::string& path, std::int64_t steps, std::int64_t warmup, int seed) {
  CheckpointInfo i;
  i.path = path;
  i.train.steps = steps;
  i.train.warmup = warmup;
  i.train.seed = seed;
  i.step = steps;
  return i;
}

TEST(BudgetCurve, AShorterBudgetIsAHalvingOfOneRecipeAndSeed) {
  using icl::learners::ShorterBudgetMismatch;
  const CheckpointInfo T = RunInfo("t.h5", 20000, 1000, 1);
  EXPECT_EQ(ShorterBudgetMismatch(T, RunInfo("h.h5", 10000, 500, 1)), "");
  EXPECT_EQ(ShorterBudgetMismatch(T, RunInfo("q.h5", 5000, 250, 1)), "");
  EXPECT_NE(ShorterBudgetMismatch(T, RunInfo("x.h5", 15000, 750, 1)).find("is not T/2^j"),
            std::string::npos);
  EXPECT_NE(ShorterBudgetMismatch(T, RunInfo("x.h5", 20000, 1000, 1)).find("is not T/2^j"),
            std::string::npos);
  EXPECT_NE(ShorterBudgetMismatch(T, RunInfo("x.h5", 10000, 1000, 1)).find("warmup"),
            std::string::npos);
  EXPECT_NE(ShorterBudgetMismatch(T, RunInfo("x.h5", 10000, 500, 2)).find("seed"),
            std::string::npos);
}

TEST(BudgetCurve, EachBudgetBelongsToOneComparedRunOnce) {
  using icl::learners::GroupBudgets;
  const CheckpointInfo a = RunInfo("a.h5", 20000, 1000, 1), b = RunInfo("b.h5", 20000, 1000, 2);
  const auto groups =
      GroupBudgets({a, b}, {RunInfo("b_q.h5", 5000, 250, 2), RunInfo("a_h.h5", 10000, 500, 1),
                            RunInfo("b_h.h5", 10000, 500, 2)});
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(groups[0][0].path, "a_h.h5");
  EXPECT_EQ(groups[0][1].path, "a.h5");
  ASSERT_EQ(groups[1].size(), 3u);
  EXPECT_EQ(groups[1][0].path, "b_q.h5");
  EXPECT_EQ(groups[1][2].path, "b.h5");
  EXPECT_TRUE(GroupBudgets({a}, {}).empty());
  try {
    GroupBudgets({a}, {RunInfo("c.h5", 10000, 500, 3)}, "budget");
    FAIL() << "a budget of another seed was taken";
  } catch (const icl::core::InputError& e) {
    EXPECT_EQ(e.field(), "budget");
    EXPECT_NE(std::string(e.what()).find("checkpoint 'c.h5'"), std::string::npos) << e.what();
  }
  try {
    GroupBudgets({a}, {RunInfo("h1.h5", 10000, 500, 1), RunInfo("h2.h5", 10000, 500, 1)});
    FAIL() << "two files of one budget were taken";
  } catch (const icl::core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("which 'h1.h5' gives already"), std::string::npos)
        << e.what();
  }
}

}  // namespace
