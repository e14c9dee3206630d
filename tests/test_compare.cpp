// Learner comparisons: SPD, implicit weights and ILWD against known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>

#include "analysis/compare.hpp"
#include "analysis/compare_run.hpp"
#include "analysis/verdicts.hpp"
#include "learners/classical.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

data::PromptSet Prompts(int d, int n, int count, double noise = 0.0) {
  data::TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  return data::SamplePrompts(t, 4, 0, count);
}

arma::mat Predictions(const data::PromptSet& s, const learners::ClassicalLearner& l) {
  arma::mat p(s.task.n, s.size());
  learners::LearnerRun run;
  for (std::size_t i = 0; i < s.size(); ++i) {
    l.Run(s.x.slice(i), s.y.col(i), run);
    p.col(i) = run.predictions;
  }
  return p;
}

}  // namespace

TEST(Spd, OfALearnerWithItselfIsZero) {
  const auto s = Prompts(3, 8, 50, 0.2);
  const auto knn = learners::MakeLearner("knn:3", s.task);
  const auto c = analysis::Spd(Predictions(s, *knn), Predictions(s, *knn), 3);
  // Exact by construction: the same deterministic double computation twice, so a - a = 0.
  EXPECT_EQ(arma::abs(c.mean).max(), 0.0);
  EXPECT_EQ(arma::abs(c.hi).max(), 0.0);
}

TEST(Spd, BetweenOlsAndRidgeVanishesAsLambdaShrinks) {
  const auto s = Prompts(3, 10, 200, 0.1);
  const arma::mat ols = Predictions(s, *learners::MakeLearner("ols", s.task));
  const auto far =
      analysis::Spd(ols, Predictions(s, *learners::MakeLearner("ridge:0.5", s.task)), 3);
  const auto near =
      analysis::Spd(ols, Predictions(s, *learners::MakeLearner("ridge:1e-12", s.task)), 3);
  EXPECT_GT(far.mean.max(), 1e-3);
  EXPECT_LT(near.mean.max(), 1e-8);
  EXPECT_EQ(near.mean(0), 0.0);  // no examples: both predict 0
}

TEST(Spd, HandMadeNumbersAndInterval) {
  const arma::mat a = {{1, 2, 3, 4}}, b = {{1, 0, 3, 0}};  // n = 1, four prompts; d = 2
  const auto c = analysis::Spd(a, b, 2);
  EXPECT_DOUBLE_EQ(c.mean(0), (0 + 4 + 0 + 16) / 4.0 / 2);
  const double sd = arma::stddev(arma::vec{0, 2, 0, 8});
  EXPECT_NEAR(c.hi(0) - c.mean(0), 1.96 * sd / 2, 1e-12);
}

TEST(ImplicitWeights, OfALinearLearnerAreItsWeights) {
  const auto s = Prompts(4, 9, 5, 0.3);
  const auto ridge = learners::MakeLearner("ridge:0.5", s.task);
  learners::LearnerRun run;
  for (std::size_t i = 0; i < s.size(); ++i) {
    ridge->Run(s.x.slice(i), s.y.col(i), run);
    for (int k = 0; k < 9; ++k) {
      // The learner as a black box: its predictions at query points after k examples.
      const arma::mat q = analysis::QueryPoints(4, 12, 1, i * 9 + k);
      const arma::vec yhat = q.t() * run.weights.col(k);
      const auto fit = analysis::FitImplicitWeights(q, yhat);
      // Double precision: a consistent least-squares fit (yhat = q^T w up to rounding) solved by
      // QR, error ~ cond(design) * eps * |w|; a 12 x 5 Gaussian design has cond ~ 5 (rarely
      // > 100), so ~1e-13 with |w| = O(1): 1e-10 leaves ~1000x. Likewise 1 - r2 = sse / sst with
      // sse ~ (eps |yhat|)^2.
      EXPECT_LT(arma::abs(fit.w - run.weights.col(k)).max(), 1e-10);
      EXPECT_NEAR(fit.intercept, 0.0, 1e-10);
      if (k > 0) {
        EXPECT_NEAR(fit.r2, 1.0, 1e-10);
      }
    }
  }
  // Fewer than d+1 queries is a caller's bug (CompareRequest::Validate refuses such --queries).
  EXPECT_TRUE(test::ThrowsInternalError(
      [&] { analysis::FitImplicitWeights(arma::randn(4, 4), arma::randn(4)); }));
}

TEST(Ilwd, HandMadeNumbers) {
  arma::cube a(2, 2, 2, arma::fill::zeros),
      b(2, 2, 2, arma::fill::zeros);  // d = 2, n = 2, 2 contexts
  a(0, 1, 0) = 1;                     // context 0, k = 1: |(1, 0) - 0|^2 = 1
  a(1, 1, 1) = 3;                     // context 1, k = 1: 9
  b(0, 0, 1) = 2;                     // context 1, k = 0: 4
  const arma::vec ilwd = analysis::Ilwd(a, b);
  EXPECT_DOUBLE_EQ(ilwd(0), (0 + 4) / 2.0 / 2);
  EXPECT_DOUBLE_EQ(ilwd(1), (1 + 9) / 2.0 / 2);
}

// ---- The compare pipeline (analysis::RunCompare), against known answers ----------------------

TEST(ComparePipeline, ALearnerAgainstItselfHasZeroSpdZeroIlwdAndLinearityOne) {
  data::TaskConfig t;
  t.d = 3;
  t.n = 8;
  t.noise = 0.1;
  std::shared_ptr<const learners::ClassicalLearner> self = learners::MakeLearner("ridge:0.1", t);
  analysis::CompareRequest req;
  req.learner_specs = "ridge:0.1,ols";
  req.prompts = 100;
  req.ilwd_prompts = 20;
  const auto r = analysis::RunCompare({analysis::ClassicalUnderTest("self", t, self)}, req);
  ASSERT_EQ(r.entries.size(), 2u);
  const auto& e = r.entries[0];
  EXPECT_EQ(e.learner, "ridge:0.1");
  // SPD: the same double computation on the same prompts, so exactly zero.
  EXPECT_EQ(arma::abs(e.spd.mean).max(), 0.0);
  // ILWD: the implicit weights are a least-squares fit to exactly linear predictions on
  // 2(d+1) = 8 Gaussian queries (condition number ~10): |w_fit - w| ~ 10 * 1e-16 * |w|, so the
  // squared difference is below 1e-26 |w|^2; 1e-20 leaves room for |w| up to 1e3.
  EXPECT_LT(e.ilwd.max(), 1e-20);
  // Linearity: R2 = 1 - SSE/SST with SSE ~ 1e-30 of SST (k = 0 predicts 0 for every query: R2
  // undefined, NaN).
  for (arma::uword k = 1; k < r.implicit_r2[0].n_rows; ++k)
    EXPECT_NEAR(arma::mean(r.implicit_r2[0].row(k)), 1.0, 1e-12) << "k=" << k;
  // And it is not zero against a different learner.
  EXPECT_GT(r.entries[1].spd.mean.max(), 1e-6);
}

TEST(ComparePipeline, TwoRidgeLearnersGiveTheClosedFormDifference) {
  data::TaskConfig t;
  t.d = 3;
  t.n = 8;
  t.noise = 0.2;
  analysis::CompareRequest req;
  req.learner_specs = "ridge:0.5";
  req.prompts = 150;
  req.ilwd_prompts = 30;
  req.seed = 11;
  const auto r = analysis::RunCompare(
      {analysis::ClassicalUnderTest("ridge01", t, learners::MakeLearner("ridge:0.1", t))}, req);
  ASSERT_EQ(r.entries.size(), 1u);
  // The same prompts, solved directly: w(lambda) = (X'X + lambda I)^-1 X'y after k examples.
  const auto set = data::SamplePrompts(t, req.seed, 0, req.prompts);
  arma::vec spd(t.n, arma::fill::zeros), ilwd(t.n, arma::fill::zeros);
  for (int i = 0; i < req.prompts; ++i)
    for (int k = 0; k < t.n; ++k) {
      arma::vec w1(t.d, arma::fill::zeros), w2(t.d, arma::fill::zeros);
      if (k > 0) {
        const arma::mat X = set.x.slice(i).cols(0, k - 1).t();  // k x d
        const arma::vec y = set.y.col(i).head(k);
        const arma::mat I = arma::eye(t.d, t.d);
        w1 = arma::solve(X.t() * X + 0.1 * I, X.t() * y);
        w2 = arma::solve(X.t() * X + 0.5 * I, X.t() * y);
      }
      const double diff = arma::dot(set.x.slice(i).col(k), w1 - w2);
      spd(k) += diff * diff / t.d / req.prompts;
      if (i < req.ilwd_prompts) ilwd(k) += arma::dot(w1 - w2, w1 - w2) / t.d / req.ilwd_prompts;
    }
  // The learners update incrementally (Sherman-Morrison), the check solves directly; with
  // lambda >= 0.1 the systems have condition numbers below ~1e3, so the weights agree to
  // ~1e3 * 1e-16 relative, and the squared differences to well within 1e-9 relative.
  for (int k = 0; k < t.n; ++k) {
    EXPECT_NEAR(r.entries[0].spd.mean(k), spd(k), 1e-9 * std::max(1e-12, spd(k))) << "k=" << k;
    // ILWD goes through the implicit-weight fit of the learner under test (exact up to ~1e-15).
    EXPECT_NEAR(r.entries[0].ilwd(k), ilwd(k), 1e-9 * std::max(1e-12, ilwd(k))) << "k=" << k;
  }
  EXPECT_GT(spd.max(), 1e-4);  // the two learners do differ
}

// The noisy-regime table: planted learners whose diagonal is known. A ridge(0.25) learner on
// tasks of sigma^2 / tau^2 = 0.25 has SPD exactly 0 from ridge:0.25 (its diagonal) and a
// positive one from ridge:1; the paired interval must say so. With `bayes` (also ridge 0.25
// there) in the list, the minimum is a tie and must not be starred.
TEST(PairedTable, FindsThePlantedDiagonalAndRefusesToStarATie) {
  data::TaskConfig quarter;
  quarter.d = 4, quarter.n = 12, quarter.noise = 0.5;  // lambda = 0.25
  data::TaskConfig noiseless = quarter;
  noiseless.noise = 0;
  auto ridge = [&](double l) {
    return std::shared_ptr<const learners::ClassicalLearner>(
        learners::MakeLearner(l == 0 ? "ols" : "ridge:" + std::to_string(l), quarter));
  };
  analysis::CompareRequest req;
  req.prompts = 400;
  req.ilwd_prompts = 4;
  req.seed = 9;
  req.learner_specs = "ols,ridge:0.25,ridge:1";
  const auto r = analysis::RunCompare({analysis::ClassicalUnderTest("r025", quarter, ridge(0.25)),
                                       analysis::ClassicalUnderTest("ols0", noiseless, ridge(0))},
                                      req);
  // One window for every column, noisy or not: k = d and d + 1 left out.
  EXPECT_EQ(r.summary_ks[0], analysis::SummaryWindow(4, 12));
  EXPECT_EQ(r.summary_ks[1], (std::vector<int>{0, 1, 2, 3, 6, 7, 8, 9, 10, 11}));
  const auto t = analysis::MakePairedTable(r);
  ASSERT_EQ(t.rows, (std::vector<std::string>{"ols", "ridge:0.25", "ridge:1"}));
  EXPECT_EQ(t.diagonal[0], "ridge:0.25");
  EXPECT_EQ(t.diagonal[1], "ols");
  const auto& on = t.cells[1][0];  // ridge:0.25 in its own column: identical predictions
  EXPECT_EQ(on.mean, 0.0);
  EXPECT_TRUE(on.minimum);
  EXPECT_TRUE(on.significant);
  EXPECT_EQ(on.diff, 0.0);
  const auto& off = t.cells[2][0];  // ridge:1 differs on every prompt: interval above 0
  EXPECT_GT(off.lo, 0.0);
  EXPECT_LE(off.lo, off.diff);
  EXPECT_LE(off.diff, off.hi);
  EXPECT_TRUE(t.cells[0][1].minimum && t.cells[0][1].significant);  // OLS, noiseless column
  // A tie: bayes is ridge 0.25 on the quarter column.
  req.learner_specs = "ols,ridge:0.25,bayes";
  const auto tie = analysis::MakePairedTable(
      analysis::RunCompare({analysis::ClassicalUnderTest("r025", quarter, ridge(0.25))}, req));
  EXPECT_EQ(tie.diagonal[0], "bayes");
  int minima = 0;
  for (std::size_t i = 0; i < tie.rows.size(); ++i)
    if (tie.cells[i][0].minimum) {
      ++minima;
      EXPECT_FALSE(tie.cells[i][0].significant) << tie.rows[i];
    }
  EXPECT_EQ(minima, 1);
}

// The fitted families: a family's fit to a member of that family finds the planted
// hyperparameter. Its SPD is then exactly 0 at the planted value and grows on both sides, and
// Brent's search narrows log(value) to a bracket of about 1e-6, so the value comes back to ~1e-6
// relative (1e-4 leaves room for a flat minimum).
TEST(FitFamily, RecoversThePlantedStepSizeAndPenalty) {
  const data::PromptSet s = Prompts(4, 12, 200, /*noise=*/0.5);
  const std::vector<int> ks = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11};
  struct Case {
    std::string fit, planted;
    double value;
    int steps;
  };
  for (const Case& c : std::vector<Case>{{"gd:fit", "gd:0.037", 0.037, 1},
                                         {"gd:fit:3", "gd:0.02:3", 0.02, 3},
                                         {"gd:fit:1..8", "gd:0.02:5", 0.02, 5},
                                         {"newton:fit", "newton:6:0.01", 0.01, 6},
                                         {"newton:fit:2..9", "newton:3:0.02", 0.02, 3},
                                         {"sgd:fit", "sgd:0.08", 0.08, 1},
                                         {"ridge:fit", "ridge:0.5", 0.5, 1},
                                         {"lasso:fit", "lasso:0.3", 0.3, 1}}) {
    analysis::FitSpec f;
    ASSERT_TRUE(analysis::ParseFitSpec(c.fit, &f));
    const auto target = Predictions(s, *learners::MakeLearner(c.planted, s.task));
    const analysis::FamilyFit fit = analysis::FitFamily(f, s, target, ks);
    EXPECT_NEAR(fit.value / c.value, 1.0, 1e-4) << c.fit;
    EXPECT_EQ(fit.steps, c.steps) << c.fit;
    EXPECT_EQ(f.Spec(c.value, c.steps), c.planted) << c.fit;
    EXPECT_LT(fit.spd, 1e-8) << c.fit;
    EXPECT_FALSE(fit.at_bound) << c.fit;
    EXPECT_FALSE(fit.steps_at_bound) << c.fit;
  }
  // The step count at the top of its range is flagged: more steps may be closer.
  analysis::FitSpec few;
  ASSERT_TRUE(analysis::ParseFitSpec("gd:fit:1..3", &few));
  const analysis::FamilyFit capped =
      analysis::FitFamily(few, s, Predictions(s, *learners::MakeLearner("gd:0.02:6", s.task)), ks);
  EXPECT_EQ(capped.steps, 3);
  EXPECT_TRUE(capped.steps_at_bound);
  // The zero predictor is GD's limit alpha -> 0: the fit runs into the range's lower end.
  analysis::FitSpec gd;
  analysis::ParseFitSpec("gd:fit", &gd);
  const analysis::FamilyFit zero = analysis::FitFamily(gd, s, arma::zeros(s.task.n, s.size()), ks);
  EXPECT_TRUE(zero.at_bound);
  EXPECT_NEAR(zero.value, gd.lo, 1e-3 * gd.lo);
  EXPECT_FALSE(analysis::ParseFitSpec("gd:0.1", nullptr));
  for (const char* bad :
       {"knn:fit", "gd:fit:0", "gd:fit:x", "ridge:fit:2", "sgd:fit:1", "gd:fit:5..5", "gd:fit:6..2",
        "gd:fit:1..", "gd:fit:..4", "gd:fit:1..1001", "newton:fit:0..3", "newton:fit:1..101",
        "newton:fit:2:3", "gd:fit:1...3", "lasso:fit:2"})
    EXPECT_THROW(analysis::ParseFitSpec(bad, nullptr), std::invalid_argument) << bad;
}

// Two paths to one fit: the grid's predictions computed inside FitFamily, and shared from
// MakeFamilyGrid (as the seeds of a cell share them). The same arithmetic in the same order, so
// the fits are identical to the bit, for two different targets on one grid; a grid of another
// window is refused.
TEST(FitFamily, ASharedGridGivesTheSameFit) {
  const data::PromptSet s = Prompts(3, 8, 60, /*noise=*/0.3);
  const std::vector<int> ks = {0, 1, 2, 5, 6, 7};
  for (const char* spec : {"gd:fit:1..6", "newton:fit:1..5", "ridge:fit"}) {
    analysis::FitSpec f;
    ASSERT_TRUE(analysis::ParseFitSpec(spec, &f));
    const analysis::FamilyGrid grid = analysis::MakeFamilyGrid(f, s, ks);
    EXPECT_EQ(analysis::FamilyGridBytes(f, s, ks),
              grid.grid.n_elem * grid.predictions[0].n_elem * sizeof(double));
    for (const char* planted : {"gd:0.03:3", "ridge:0.7"}) {
      const auto target = Predictions(s, *learners::MakeLearner(planted, s.task));
      const analysis::FamilyFit own = analysis::FitFamily(f, s, target, ks);
      const analysis::FamilyFit with = analysis::FitFamily(f, s, target, ks, &grid);
      EXPECT_EQ(own.value, with.value) << spec << " " << planted;
      EXPECT_EQ(own.spd, with.spd) << spec << " " << planted;
      EXPECT_EQ(own.steps, with.steps) << spec << " " << planted;
      EXPECT_EQ(own.at_bound, with.at_bound) << spec << " " << planted;
    }
    EXPECT_THROW(analysis::FitFamily(f, s, Predictions(s, *learners::MakeLearner("ols", s.task)),
                                     {0, 1}, &grid),
                 std::logic_error);
  }
}

// compare with fitted learners: each is fitted on prompts disjoint from the scored ones, and a
// classical learner under test is matched by its own family at its own value, significantly
// closer than the runner-up.
TEST(ComparePipeline, FittedFamiliesFindTheLearnerUnderTest) {
  data::TaskConfig t;
  t.d = 3;
  t.n = 8;
  std::shared_ptr<const learners::ClassicalLearner> self = learners::MakeLearner("gd:0.05", t);
  analysis::CompareRequest req;
  req.learner_specs = "ridge:fit, gd:fit,ols";
  req.prompts = 200;
  req.ilwd_prompts = 10;
  req.fit_prompts = 100;
  const auto r = analysis::RunCompare({analysis::ClassicalUnderTest("gd", t, self)}, req);
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.entries[0].learner, "ridge:fit");
  EXPECT_EQ(r.entries[1].learner, "gd:fit");
  EXPECT_NEAR(r.entries[1].fitted / 0.05, 1.0, 1e-4);
  EXPECT_TRUE(std::isnan(r.entries[2].fitted));
  EXPECT_LT(arma::mean(r.entries[1].spd_prompt), 1e-8);
  std::ostringstream summary, csv;
  analysis::PrintCompareSummary(summary, r, req.learner_specs);
  EXPECT_NE(summary.str().find("closest (mean SPD / d over the summary k): gd:fit (alpha 0.05)"),
            std::string::npos)
      << summary.str();
  EXPECT_NE(summary.str().find("(significant)"), std::string::npos) << summary.str();
  analysis::WriteCompareCsv(csv, r);
  EXPECT_NE(csv.str().find("gd,gd:fit,0,"), std::string::npos);
  // A fitted learner has no value in the all-pairs table.
  req.all_pairs = true;
  EXPECT_THROW(analysis::RunCompare({analysis::ClassicalUnderTest("gd", t, self)}, req),
               std::invalid_argument);
}

// Verdicts over a cell of planted "seeds". Two seeds that are both gd:0.05 are matched by
// gd:0.05 exactly (SPD 0) at every k >= 1, significantly and stably; at k = 0 every linear
// learner predicts 0, so the margin is exactly 0 and not significant. A cell whose second seed
// is OLS is not stable. The cell's curve is the mean over seeds of each seed's SPD (two paths:
// the cell analysis and Spd per seed).
TEST(CellVerdicts, PlantedSeedsGiveKnownVerdicts) {
  data::TaskConfig t;
  t.d = 3, t.n = 8;
  auto learner = [&](const std::string& spec) {
    return std::shared_ptr<const learners::ClassicalLearner>(learners::MakeLearner(spec, t));
  };
  analysis::CompareRequest req;
  req.prompts = 120;
  req.ilwd_prompts = 3;
  req.learner_specs = "ols,gd:0.05";
  const auto r = analysis::RunCompare({analysis::ClassicalUnderTest("a/1", t, learner("gd:0.05")),
                                       analysis::ClassicalUnderTest("a/2", t, learner("gd:0.05")),
                                       analysis::ClassicalUnderTest("b/1", t, learner("gd:0.05")),
                                       analysis::ClassicalUnderTest("b/2", t, learner("ols"))},
                                      req);
  const auto v = analysis::AnalyseCells(r, {{"a", {"a/1", "a/2"}}, {"b", {"b/1", "b/2"}}}, 200);
  ASSERT_EQ(v.verdicts.size(), 2u * (8 + 1));
  for (int k = 1; k <= 8; ++k) {  // k = 8 is the window row (k = -1)
    const analysis::Verdict& x = v.verdicts[k];
    EXPECT_EQ(x.closest, "gd:0.05") << k;
    EXPECT_EQ(x.closest_spd, 0.0) << k;
    EXPECT_TRUE(x.significant) << k;
    EXPECT_TRUE(x.stable) << k;
    EXPECT_EQ(x.seeds, 2);
  }
  EXPECT_EQ(v.verdicts[8].k, -1);
  EXPECT_EQ(v.verdicts[0].margin, 0.0);
  EXPECT_FALSE(v.verdicts[0].significant);
  const analysis::Verdict& mixed = v.verdicts[9 + 8];  // cell b, the window
  EXPECT_FALSE(mixed.stable);
  EXPECT_EQ(mixed.per_seed, (std::vector<std::string>{"gd:0.05", "ols"}));
  // Cell b's curve for ols: seed 1 (gd) has SPD(gd, ols), seed 2 (ols) has 0.
  const auto ols_pred = Predictions(data::SamplePrompts(t, req.seed, 0, req.prompts),
                                    *learners::MakeLearner("ols", t));
  const auto gd_pred = Predictions(data::SamplePrompts(t, req.seed, 0, req.prompts),
                                   *learners::MakeLearner("gd:0.05", t));
  const arma::vec want = analysis::Spd(gd_pred, ols_pred, 3).mean / 2;
  bool found = false;
  for (const auto& c : v.curves)
    if (c.cell == "b" && c.learner == "ols") {
      found = true;
      // Means of the same squares in another order: relative 1e-12.
      EXPECT_LE(arma::abs(c.mean - want).max(), 1e-12 * want.max());
      EXPECT_TRUE(arma::all(c.lo <= c.mean + 1e-15) && arma::all(c.mean <= c.hi + 1e-15));
    }
  EXPECT_TRUE(found);
  // Errors: an unknown model, a model in two cells, a cell over two tasks.
  EXPECT_THROW(analysis::AnalyseCells(r, {{"x", {"nope"}}}), std::invalid_argument);
  EXPECT_THROW(analysis::AnalyseCells(r, {{"x", {"a/1"}}, {"y", {"a/1"}}}), std::invalid_argument);
  data::TaskConfig noisy = t;
  noisy.noise = 0.5;
  const auto two = analysis::RunCompare({analysis::ClassicalUnderTest("p", t, learner("ols")),
                                         analysis::ClassicalUnderTest("q", noisy, learner("ols"))},
                                        req);
  try {
    analysis::AnalyseCells(two, {{"pq", {"p", "q"}}});
    ADD_FAILURE() << "a cell over two tasks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mixes learners compared on different tasks"),
              std::string::npos)
        << e.what();
  }
}

// Garg et al.'s orthogonal query, as a known answer: min-norm OLS, ridge and GD from 0 keep
// their weights in the span of the k examples, so where k < d they predict exactly 0 (up to
// rounding) at a query orthogonal to that span, and the zero learner is then their equal; kNN
// is not linear and does not. And the predictions are read at the queries, not at the examples.
TEST(ComparePipeline, OrthogonalQueriesGiveTheSpanLearnersZeroPredictions) {
  data::TaskConfig t;
  t.d = 4;
  t.n = 7;
  t.query_shift = data::ParseShift("orthogonal", "query_shift");
  analysis::CompareRequest req;
  req.learner_specs = "zero,ridge:0.5,gd:0.05:3,knn:2";
  req.prompts = 60;
  req.ilwd_prompts = 2;
  req.task = t;
  const auto r = analysis::RunCompare(
      {analysis::ClassicalUnderTest("ols", t, learners::MakeLearner("ols", t))}, req);
  ASSERT_EQ(r.entries.size(), 4u);
  for (int k = 1; k < t.d; ++k) {
    // Weights w = X_k' a: w.q = a.(X_k q), and |X_k q| is Gram-Schmidt rounding, ~1e-15 |x||q|
    // per example; squared, / d: far below 1e-20 for unit-scale prompts.
    for (int e = 0; e < 3; ++e)
      EXPECT_LT(r.entries[e].spd.mean(k), 1e-20) << r.entries[e].learner << " k=" << k;
    EXPECT_GT(r.entries[3].spd.mean(k), 1e-3) << "knn k=" << k;
  }
  // From k = d on the examples span R^4 and the queries are ordinary: OLS predicts w.q != 0.
  EXPECT_GT(r.entries[0].spd.mean(t.d + 1), 1e-2);
}

namespace {

// A learner under test planted at a known distance: a linear classical learner whose weights
// after every k carry independent Gaussian noise of variance v per coordinate, drawn from the
// prompt's inputs and a seed. On queries x ~ N(0, I_d) its SPD / d to its base learner is
// v E|x|^2 / d = v in expectation, and to any other learner B it is SPD(base, B) + v (the noise
// is independent of both), so the ratio SPD(B) / SPD(base) is planted as 1 + SPD(base, B) / v.
class NoisyLearner : public learners::ClassicalLearner {
 public:
  NoisyLearner(std::unique_ptr<learners::ClassicalLearner> base, double v, std::uint64_t seed)
      : base_(std::move(base)), sigma_(std::sqrt(v)), seed_(seed) {}
  std::string spec() const override { return base_->spec() + "+noise"; }
  bool is_linear() const override { return true; }
  void Run(const arma::mat& x, const arma::vec& y, learners::LearnerRun& out) const override {
    base_->Run(x, y, out);
    std::uint64_t h = seed_ * 0x9e3779b97f4a7c15ULL;
    for (double e : x)  // the prompt's inputs
      h = (h ^ std::hash<double>{}(e)) * 0x100000001b3ULL;
    std::mt19937_64 gen(h);
    std::normal_distribution<double> normal;
    for (double& w : out.weights)
      w += sigma_ * normal(gen);
    for (arma::uword k = 0; k < out.predictions.n_elem; ++k)
      out.predictions(k) = arma::dot(out.weights.col(k), x.col(k));
  }

 private:
  std::unique_ptr<learners::ClassicalLearner> base_;
  double sigma_;
  std::uint64_t seed_;
};

// SPD(ols, ridge:2) / d over the summary window on `req`'s prompts, from OLS itself under test
// (req.learner_specs must hold ridge:2).
double OlsToRidge2(const data::TaskConfig& t, const analysis::CompareRequest& req) {
  const auto ref = analysis::RunCompare(
      {analysis::ClassicalUnderTest(
          "ols", t,
          std::shared_ptr<const learners::ClassicalLearner>(learners::MakeLearner("ols", t)))},
      req);
  for (const auto& e : ref.entries)
    if (e.model == "ols" && e.learner == "ridge:2") return arma::mean(e.spd_prompt);
  return arma::datum::nan;
}

}  // namespace

// The separation rule on planted learners (three seeds each): a 3x separation with a small seed
// spread is resolved; the same with one seed planted on the other side is not; a 1.1x
// separation is not; a cell whose budgets follow different learners changes with training.
TEST(SeparationRule, ResolvesOnlyWhatTheDataCanCarry) {
  data::TaskConfig t;
  t.d = 4, t.n = 10;
  analysis::CompareRequest req;
  req.prompts = 400;
  req.ilwd_prompts = 2;
  req.learner_specs = "ols,ridge:2";
  auto make = [&](const std::string& spec) { return learners::MakeLearner(spec, t); };
  const double s = OlsToRidge2(t, req);
  ASSERT_TRUE(std::isfinite(s) && s > 0);
  // v = s / 2 plants a ratio of 3; v = 10 s a ratio of 1.1.
  auto noisy = [&](const std::string& name, const std::string& base, double ratio,
                   std::uint64_t seed) {
    return analysis::ClassicalUnderTest(
        name, t, std::make_shared<NoisyLearner>(make(base), s / (ratio - 1), seed));
  };
  const auto r = analysis::RunCompare(
      {noisy("a/1", "ols", 3, 1), noisy("a/2", "ols", 3, 2), noisy("a/3", "ols", 3, 3),
       noisy("b/1", "ols", 3, 4), noisy("b/2", "ols", 3, 5), noisy("b/3", "ridge:2", 3, 6),
       noisy("c/1", "ols", 1.1, 7), noisy("c/2", "ols", 1.1, 8), noisy("c/3", "ols", 1.1, 9),
       noisy("h/1", "ridge:2", 3, 10), noisy("h/2", "ridge:2", 3, 11),
       noisy("h/3", "ridge:2", 3, 12)},
      req);
  const auto a = analysis::AnalyseCells(r,
                                        {{"a", {"a/1", "a/2", "a/3"}},
                                         {"b", {"b/1", "b/2", "b/3"}},
                                         {"c", {"c/1", "c/2", "c/3"}},
                                         {"h", {"h/1", "h/2", "h/3"}}},
                                        400);
  auto window = [&](const std::string& cell) {
    for (const auto& v : a.verdicts)
      if (v.cell == cell && v.k < 0) return v;
    ADD_FAILURE() << "no window verdict for " << cell;
    return analysis::Verdict{};
  };
  const analysis::Verdict va = window("a"), vb = window("b"), vc = window("c");
  EXPECT_EQ(va.closest, "ols");
  EXPECT_EQ(va.separated_from, "ridge:2");
  // The ratio is 1 + s / v-hat with v-hat the noise's mean square over 400 prompts x 3 seeds
  // (relative standard error about sqrt(2 / 1200) = 0.04) plus a cross term of mean 0 and
  // standard error about 2 sqrt(s v / 1200) / v = 0.08 at s / v = 2: 0.5 is over 5 of them.
  EXPECT_NEAR(va.ratio, 3.0, 0.5);
  EXPECT_TRUE(va.resolved) << va.ratio << " [" << va.ratio_lo << ", " << va.ratio_hi << "]";
  EXPECT_EQ(va.basis, "seeds");
  EXPECT_EQ(va.among, (std::vector<std::string>{"ols"}));
  EXPECT_FALSE(vb.resolved) << vb.ratio;  // seed 3 follows ridge: its own ratio is below 1
  ASSERT_EQ(vb.seed_ratios.size(), 3u);
  EXPECT_LT(vb.seed_ratios[2], 1.0);
  EXPECT_EQ(vb.among.size(), 2u);
  EXPECT_FALSE(vc.resolved) << vc.ratio;  // 1.1: below the ratio of 2 whatever the interval
  // At s / v = 0.1 the cross term's standard error is about 2 sqrt(0.1 / 1200) = 0.018.
  EXPECT_NEAR(vc.ratio, 1.1, 0.08);
  // Budgets: h (ridge at T/2) against a (ols at T) changes with training.
  const auto half = analysis::CompareWithShorterBudgets(a, {{"a", "h"}, {"a", "a"}});
  // (a against itself: the same learner; ridge:2 and ols are of no one family.)
  EXPECT_TRUE(half[0].changes_with_training);
  EXPECT_FALSE(half[1].changes_with_training);
  std::ostringstream text;
  analysis::PrintVerdicts(text, a);
  EXPECT_NE(text.str().find("follows ols, not ridge:2"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("unresolved among {ols, ridge:2}"), std::string::npos) << text.str();
  std::ostringstream half_text;
  analysis::PrintBudgetAgreement(half_text, half);
  EXPECT_NE(half_text.str().find("changes with training"), std::string::npos);
  // One seed: prompts alone, labelled.
  const auto one = analysis::AnalyseCells(r, {{"a1", {"a/1"}}}, 400);
  EXPECT_EQ(one.verdicts.back().basis, "one seed");
  EXPECT_TRUE(one.verdicts.back().resolved);
}

// OLS and the fitted families that contain it are never separated by a ratio; nor a fitted
// gradient-descent family and its fixed members.
TEST(SeparationRule, NestedFamiliesAreNeverSeparatedByARatio) {
  EXPECT_TRUE(analysis::Nested("ols", "ridge:fit"));
  EXPECT_TRUE(analysis::Nested("newton:fit", "ols"));
  EXPECT_TRUE(analysis::Nested("ridge:fit", "newton:fit:1..8"));
  EXPECT_FALSE(analysis::Nested("ridge:fit", "ridge:0.1"));  // the fitted lambda says which
  EXPECT_FALSE(analysis::Nested("bayes", "ridge:fit"));
  EXPECT_TRUE(analysis::Nested("gd:fit:1..16", "gd:0.05"));
  EXPECT_FALSE(analysis::Nested("ols", "ridge:0.1"));
  EXPECT_FALSE(analysis::Nested("ols", "gd:fit"));
  EXPECT_FALSE(analysis::Nested("gd:0.05", "gd:0.02"));
  EXPECT_FALSE(analysis::Nested("ridge:fit", "gd:fit"));
}

// The fitted families that reach OLS say which they are by their fitted parameter. Three seeds of
// OLS with planted weight noise: ridge:fit goes to small lambda, its member lies nearer OLS than
// the noisy learner lies to it (the noise v is independent of every member), so the cell is
// OLS-like. Three seeds of ridge(2) with noise 1e-6 of SPD(ridge:2, ols): the fit recovers lambda
// 2 (the fit's resolution is about 1e-4 relative, FitFamily.RecoversThePlantedStepSizeAndPenalty;
// the noise moves it far less), and the member (ridge:2 to that resolution) lies
// SPD(ridge:2, ols) from OLS, a million times the learner's residual: not OLS-like.
TEST(SeparationRule, FittedFamiliesThatReachOlsSayWhichTheyAre) {
  data::TaskConfig t;
  t.d = 4, t.n = 10;
  analysis::CompareRequest req;
  req.prompts = 300;
  req.ilwd_prompts = 2;
  req.fit_prompts = 100;
  req.learner_specs = "ols,ridge:2";
  auto make = [&](const std::string& spec) { return learners::MakeLearner(spec, t); };
  const double s = OlsToRidge2(t, req);
  ASSERT_TRUE(std::isfinite(s) && s > 0);
  auto noisy = [&](const std::string& name, const std::string& base, double v, std::uint64_t seed) {
    return analysis::ClassicalUnderTest(name, t,
                                        std::make_shared<NoisyLearner>(make(base), v, seed));
  };
  req.learner_specs = "ols,ridge:fit,gd:0.05";
  const auto r = analysis::RunCompare(
      {noisy("o/1", "ols", s / 2, 1), noisy("o/2", "ols", s / 2, 2), noisy("o/3", "ols", s / 2, 3),
       noisy("r/1", "ridge:2", 1e-6 * s, 4), noisy("r/2", "ridge:2", 1e-6 * s, 5),
       noisy("r/3", "ridge:2", 1e-6 * s, 6)},
      req);
  // The member's distance from OLS is the window mean of SPD(ridge:lambda, ols) / d: for the
  // ridge(2) cell's members that is s itself, to the fit's resolution.
  for (const auto& e : r.entries) {
    if (e.learner != "ridge:fit") {
      EXPECT_TRUE(std::isnan(e.member_ols_spd)) << e.learner;
      continue;
    }
    if (e.model[0] == 'r') {
      EXPECT_NEAR(e.member_ols_spd / s, 1.0, 1e-2) << e.model;
    }
  }
  const auto a =
      analysis::AnalyseCells(r, {{"o", {"o/1", "o/2", "o/3"}}, {"r", {"r/1", "r/2", "r/3"}}}, 200);
  ASSERT_EQ(a.fitted.size(), 2u);
  const analysis::FittedParameter& o = a.fitted[0];
  const analysis::FittedParameter& rr = a.fitted[1];
  EXPECT_EQ(o.cell, "o");
  EXPECT_EQ(o.learner, "ridge:fit");
  EXPECT_EQ(o.name, "lambda");
  EXPECT_EQ(o.basis, "seeds");
  ASSERT_EQ(o.per_seed.size(), 3u);
  EXPECT_TRUE(o.steps.empty());
  EXPECT_TRUE(o.ols_like) << o.member_ols_spd << " vs " << o.learner_member_spd;
  EXPECT_LT(o.member_ols_spd, o.learner_member_spd);
  EXPECT_LE(o.lo, o.center);
  EXPECT_LE(o.center, o.hi);
  EXPECT_FALSE(rr.ols_like);
  EXPECT_LE(rr.lo, rr.center);
  EXPECT_LE(rr.center, rr.hi);
  EXPECT_NEAR(rr.center / 2.0, 1.0, 1e-3);
  // The geometric mean is exp(mean(log lambda)) of the three seeds' values.
  EXPECT_NEAR(
      rr.center,
      std::exp((std::log(rr.per_seed[0]) + std::log(rr.per_seed[1]) + std::log(rr.per_seed[2])) /
               3),
      1e-12 * rr.center);
  std::ostringstream text, csv;
  analysis::PrintVerdicts(text, a);
  EXPECT_NE(text.str().find("fitted ridge:fit: lambda"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(": OLS-like"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("not OLS-like"), std::string::npos) << text.str();
  analysis::WriteFittedCsv(csv, a);
  EXPECT_EQ(csv.str().substr(0, csv.str().find('\n')),
            "cell,learner,parameter,seeds,per_seed,steps,center,lo,hi,basis,member_ols_spd,"
            "learner_member_spd,ols_like");
  EXPECT_NE(csv.str().find("\nr,ridge:fit,lambda,3,"), std::string::npos) << csv.str();
}
