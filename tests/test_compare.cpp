// Learner comparisons: SPD, implicit weights and ILWD against known answers.
#include <gtest/gtest.h>

#include "analysis/compare.hpp"
#include "learners/classical.hpp"

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
  EXPECT_THROW(analysis::FitImplicitWeights(arma::randn(4, 4), arma::randn(4)),
               std::invalid_argument);
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
