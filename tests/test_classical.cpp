// Classical learners: known answers on hand-made and planted data.
#include <gtest/gtest.h>

#include "analysis/learner_errors.hpp"
#include "core/errors.hpp"
#include "data/targets.hpp"
#include "learners/classical.hpp"

using namespace icl;
using learners::LearnerRun;
using learners::MakeLearner;

namespace {

data::TaskConfig Task(int d, int n, double noise = 0.0) {
  data::TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  return t;
}

std::string ErrorOf(const std::string& spec) {
  try {
    MakeLearner(spec, Task(2, 2));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Ridge, MatchesNormalEquationsAtEveryK) {
  const data::PromptSet s = data::SamplePrompts(Task(4, 10, 0.3), 5, 0, 5);
  const auto ridge = MakeLearner("ridge:0.5", s.task);
  LearnerRun run;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const arma::mat x = s.x.slice(i);
    const arma::vec y = s.y.col(i);
    ridge->Run(x, y, run);
    EXPECT_EQ(run.predictions(0), 0.0);  // no examples: w = 0
    for (int k = 1; k < 10; ++k) {
      const arma::mat xk = x.cols(0, k - 1);
      const arma::vec w = arma::solve(xk * xk.t() + 0.5 * arma::eye(4, 4), xk * y.head(k));
      // Double precision: lambda = 0.5 bounds cond(X X^T + lambda I) <= 1 + s_max^2 / 0.5 ~ 60 for
      // d = 4, k <= 9 Gaussian examples, so both solves agree to ~k * 60 * eps * |w| ~ 1e-13
      // with |w| = O(1): 1e-10 leaves ~1000x.
      EXPECT_LT(arma::norm(run.weights.col(k) - w), 1e-10);
      EXPECT_NEAR(run.predictions(k), arma::dot(w, x.col(k)), 1e-10);
    }
  }
}

TEST(Ridge, TinyLambdaApproachesOls) {
  const data::PromptSet s = data::SamplePrompts(Task(5, 12, 0.1), 6, 0, 20);
  const auto ols = MakeLearner("ols", s.task);
  // The median over prompts of the mean |prediction difference| to OLS shrinks in proportion
  // to lambda (the median, because near-singular X_k at k = d make a few prompts' OLS explode).
  std::vector<double> gap;
  for (const char* spec : {"ridge:1e-3", "ridge:1e-6", "ridge:1e-9"}) {
    const auto ridge = MakeLearner(spec, s.task);
    LearnerRun a, b;
    arma::vec per_prompt(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      ols->Run(s.x.slice(i), s.y.col(i), a);
      ridge->Run(s.x.slice(i), s.y.col(i), b);
      per_prompt(i) = arma::mean(arma::abs(a.predictions - b.predictions));
    }
    gap.push_back(arma::median(per_prompt));
  }
  EXPECT_LT(gap[1], 1e-2 * gap[0]);
  EXPECT_LT(gap[2], 1e-2 * gap[1]);
  EXPECT_GT(gap[0], 0.0);
}

TEST(Ols, LearnerWeightsAreTheOlsTargets) {
  // Two paths: the learner's weights after k examples equal the w_ols target after k.
  const data::PromptSet s = data::SamplePrompts(Task(3, 7, 0.3), 2, 0, 10);
  const data::TargetSet t = data::ComputeTargets(s, 0.0);
  LearnerRun run;
  for (std::size_t i = 0; i < s.size(); ++i) {
    MakeLearner("ols", s.task)->Run(s.x.slice(i), s.y.col(i), run);
    // Both paths run the same IncrementalRidge(d, 0) code on the same examples in the same order,
    // so they agree bit for bit; 1e-12 is only a margin.
    EXPECT_LT(arma::abs(run.weights.cols(1, 6) - t.w_ols.slice(i).cols(0, 5)).max(), 1e-12);
  }
}

TEST(Ols, NoiselessErrorVanishesFromKEqualsD) {
  const data::PromptSet s = data::SamplePrompts(Task(8, 20), 1, 0, 200);
  const arma::mat err = learners::PerPromptErrors(s, *MakeLearner("ols", s.task));
  // Only rounding from k = d: |prediction - y| ~ k * cond(X_k)^2 * eps * |w| |x|. The bound on the
  // squared error, 1e-8 * d, allows |prediction - y| up to 2.8e-4, reached only for
  // cond(X_k) ~ 1e5 (an 8 x 8 Gaussian design gets there with probability ~1e-4; the seeded
  // prompts are the same on every machine, only their rounding differs).
  EXPECT_LE(err.rows(8, 19).max(), 1e-8);
  EXPECT_GT(arma::mean(err.row(7)), 0.01);  // under-determined below d
  // k = 0 predicts 0: E[(w.x)^2] / d = tau^2 = 1.
  EXPECT_NEAR(arma::mean(err.row(0)), 1.0, 0.25);
}

TEST(Gd, OneStepMatchesFormula) {
  const arma::mat x = {{1, 0, 2}, {0, 1, 1}};  // d = 2, n = 3
  const arma::vec y = {2, -1, 0.5};
  LearnerRun run;
  learners::GdLearner(0.1).Run(x, y, run);
  // w = -2 alpha (X^T X w0 - X^T y) with w0 = 0.
  const arma::vec w2 = 2 * 0.1 * (x.cols(0, 1) * y.head(2));
  EXPECT_LT(arma::norm(run.weights.col(2) - w2), 1e-15);
  EXPECT_NEAR(run.predictions(2), arma::dot(w2, x.col(2)), 1e-15);
  EXPECT_NEAR(run.predictions(1), 2 * 0.1 * 2 * 0.0, 1e-15);  // x_1 . x_2 = 0
}

TEST(Gd, SeveralStepsMatchTheClosedForm) {
  // K steps of w <- w - 2a (A w - b) from 0, with A = X^T X invertible, give
  // w_K = (I - (I - 2a A)^K) A^{-1} b: a second, independent path to the same numbers.
  arma::arma_rng::set_seed(4);
  const arma::mat x(3, 9, arma::fill::randn);
  const arma::vec y(9, arma::fill::randn);
  const double a = 0.02;
  const int K = 5, k = 8;
  LearnerRun run;
  learners::GdLearner(a, K).Run(x, y, run);
  const arma::mat A = x.cols(0, k - 1) * x.cols(0, k - 1).t();
  const arma::vec b = x.cols(0, k - 1) * y.head(k);
  const arma::mat M = arma::eye(3, 3) - 2 * a * A;
  const arma::vec want = (arma::eye(3, 3) - M * M * M * M * M) * arma::solve(A, b);
  // Both paths are a few dozen double operations on numbers of size ~ |A| |w| <= 100: agreement
  // to 1e-12 relative leaves room for cond(A) amplification of the solve (checked below).
  ASSERT_LT(arma::cond(A), 100.0);
  EXPECT_LT(arma::norm(run.weights.col(k) - want), 1e-12 * std::max(1.0, arma::norm(want)));
  EXPECT_EQ(learners::GdLearner(a, K).spec(), "gd:0.02:5");
}

TEST(Sgd, FirstStepsMatchHandComputation) {
  const arma::mat x = {{1, 2, 1}, {1, 0, -1}};
  const arma::vec y = {3, 1, 0};
  const double a = 0.05;
  LearnerRun run;
  learners::SgdLearner(a).Run(x, y, run);
  // w1 = 2 a y1 x1 = (0.3, 0.3); prediction of y2 = w1 . x2 = 0.6.
  EXPECT_NEAR(run.weights(0, 1), 0.3, 1e-15);
  EXPECT_NEAR(run.weights(1, 1), 0.3, 1e-15);
  EXPECT_NEAR(run.predictions(1), 0.6, 1e-15);
  // w2 = w1 - 2a (x2 x2^T w1 - y2 x2) = (0.3, 0.3) - 0.1 ((0.6 - 1) * (2, 0)) = (0.38, 0.3).
  EXPECT_NEAR(run.weights(0, 2), 0.38, 1e-15);
  EXPECT_NEAR(run.weights(1, 2), 0.3, 1e-15);
  EXPECT_NEAR(run.predictions(2), 0.38 - 0.3, 1e-15);
}

TEST(Knn, FivePointHandExample) {
  const arma::mat x = {{0, 1, 3, 4, 2.6}};  // d = 1
  const arma::vec y = {1, 2, 3, 4, 9};
  LearnerRun run;
  learners::KnnLearner(3, false).Run(x, y, run);
  // k=0: nothing; k=1: one neighbour; k=2: both; k=3: all three; k=4: 3 (0.4), 4 (1.4), 1 (1.6).
  const arma::vec expected = {0, 1, 1.5, 2, 3};
  EXPECT_LT(arma::abs(run.predictions - expected).max(), 1e-12);
  EXPECT_TRUE(run.weights.is_empty());

  learners::KnnLearner(3, true).Run(x, y, run);
  const double w3 = 1 / 0.16, w4 = 1 / 1.96, w2 = 1 / 2.56;
  EXPECT_NEAR(run.predictions(4), (3 * w3 + 4 * w4 + 2 * w2) / (w3 + w4 + w2), 1e-12);
  EXPECT_NEAR(run.predictions(2), (1 * 1 / 9.0 + 2 * 1 / 4.0) / (1 / 9.0 + 1 / 4.0), 1e-12);

  const arma::mat dup = {{0, 1, 1}};  // exact match takes that point's y
  learners::KnnLearner(3, true).Run(dup, arma::vec{5, 7, 0}, run);
  EXPECT_EQ(run.predictions(2), 7.0);
}

TEST(Zero, PredictsZero) {
  LearnerRun run;
  learners::ZeroLearner().Run(arma::mat(3, 4, arma::fill::randn), arma::vec(4, arma::fill::randn),
                              run);
  EXPECT_EQ(arma::abs(run.predictions).max(), 0.0);
}

TEST(LearnerSpecs, ParseNamesAndRefuseMalformed) {
  const data::TaskConfig noisy = Task(4, 8, 0.5);
  EXPECT_EQ(MakeLearner("ols", noisy)->spec(), "ols");
  EXPECT_EQ(MakeLearner("ridge:0.1", noisy)->spec(), "ridge:0.1");
  EXPECT_EQ(MakeLearner("bayes", noisy)->spec(), "bayes");
  EXPECT_EQ(MakeLearner("gd:0.01", noisy)->spec(), "gd:0.01");
  EXPECT_EQ(MakeLearner("gd:0.01:1", noisy)->spec(), "gd:0.01");
  EXPECT_EQ(MakeLearner("gd:0.01:4", noisy)->spec(), "gd:0.01:4");
  EXPECT_EQ(MakeLearner("sgd:0.03", noisy)->spec(), "sgd:0.03");
  EXPECT_EQ(MakeLearner("knn:3", noisy)->spec(), "knn:3");
  EXPECT_EQ(MakeLearner("knn:3:weighted", noisy)->spec(), "knn:3:weighted");
  EXPECT_EQ(MakeLearner("zero", noisy)->spec(), "zero");
  EXPECT_EQ(learners::MakeLearners("ols, knn:5", noisy).size(), 2u);

  EXPECT_NE(ErrorOf("ridge:abc").find("expected ridge:LAMBDA"), std::string::npos);
  EXPECT_NE(ErrorOf("ridge").find("expected ridge:LAMBDA"), std::string::npos);
  EXPECT_NE(ErrorOf("ridge:-1").find("non-negative"), std::string::npos);
  EXPECT_NE(ErrorOf("gd:0").find("positive step size"), std::string::npos);
  EXPECT_NE(ErrorOf("gd:0.1:0").find("gd:ALPHA:STEPS"), std::string::npos);
  EXPECT_NE(ErrorOf("gd:0.1:2.5").find("gd:ALPHA:STEPS"), std::string::npos);
  EXPECT_NE(ErrorOf("sgd:0.1:2").find("sgd:ALPHA"), std::string::npos);
  EXPECT_NE(ErrorOf("knn:2.5").find("positive integer"), std::string::npos);
  EXPECT_NE(ErrorOf("knn:3:heavy").find("knn:K:weighted"), std::string::npos);
  EXPECT_NE(ErrorOf("lars:1").find("unknown learner spec 'lars:1'"), std::string::npos);
  EXPECT_THROW(learners::MakeLearners("ols,,knn:3", noisy), std::invalid_argument);
  // A bad spec is the user's setting, named as such (the CLI shows it as --learners).
  try {
    MakeLearner("lars:1", Task(2, 2));
    ADD_FAILURE() << "lars:1 was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.field(), "learners");
    EXPECT_NE(e.text().find("lars:1"), std::string::npos);
  }
}

TEST(Bayes, IsRidgeWithNoiseOverScaleSquaredAndBestOnNoisyData) {
  data::TaskConfig t = Task(4, 16, 0.5);
  const data::PromptSet s = data::SamplePrompts(t, 8, 0, 3000);
  const arma::mat bayes = learners::PerPromptErrors(s, *MakeLearner("bayes", t));
  const arma::mat ridge = learners::PerPromptErrors(s, *MakeLearner("ridge:0.25", t));
  // Exact by construction: BayesLambda = 0.5^2 / 1^2 = 0.25 exactly, and both are the same
  // RidgeLearner code on the same prompts in the same process.
  EXPECT_EQ(arma::abs(bayes - ridge).max(), 0.0);
  // Paired comparison per k: no other learner beats Bayes ridge beyond sampling error.
  for (const char* spec : {"ols", "ridge:0.05", "ridge:1", "gd:0.02", "sgd:0.03", "knn:3"}) {
    const arma::mat diff = learners::PerPromptErrors(s, *MakeLearner(spec, t)) - bayes;  // n x N
    for (int k = 1; k < t.n; ++k) {
      const arma::rowvec dk = diff.row(k);
      const double se = arma::stddev(dk) / std::sqrt(static_cast<double>(dk.n_elem));
      EXPECT_GT(arma::mean(dk), -3 * se) << spec << " beats bayes at k=" << k;
    }
  }
}

// Newton-Schulz from Y_0 = C I, one step by hand (d = 1): A = x_1^2 + lambda = 4 + 1 = 5,
// Y_1 = C (2 - A C) = 0.1 (2 - 0.5) = 0.15, w = Y_1 x_1 y_1 = 0.15 * 6 = 0.9; the prediction
// of y_2 at x_2 = 1 is 0.9.
TEST(Newton, OneStepByHand) {
  const auto newton = MakeLearner("newton:1:0.1:1", Task(1, 2));
  EXPECT_EQ(newton->spec(), "newton:1:0.1:1");
  EXPECT_TRUE(newton->is_linear());
  learners::LearnerRun run;
  newton->Run(arma::mat{{2.0, 1.0}}, arma::vec{3.0, 7.0}, run);
  EXPECT_DOUBLE_EQ(run.weights(0, 0), 0.0);  // no example yet
  EXPECT_NEAR(run.weights(0, 1), 0.9, 1e-15);
  EXPECT_NEAR(run.predictions(1), 0.9, 1e-15);
}

// Where 0 < C < 2 / lambda_max(A), ||I - A Y_t|| = ||I - C A||^(2^t): with C = 1 / lambda_max
// and lambda_min >= lambda = 0.25, ||I - C A|| <= 1 - 0.25 / lambda_max < 0.995 for these
// prompts (lambda_max < 50), so 20 steps leave 0.995^(2^20) ~ 0 of the start; what remains is
// rounding, about cond(A) = lambda_max / lambda < 200 times 1e-16. Bound: 1e-11 relative.
TEST(Newton, ConvergesToRidgeInsideItsRangeAndSaysWhereItDoesNot) {
  const data::PromptSet s = data::SamplePrompts(Task(4, 12, 0.5), 7, 0, 20);
  double lambda_max = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const arma::mat x(const_cast<double*>(s.x.slice_memptr(i)), 4, 12, false, true);
    lambda_max = std::max(lambda_max, arma::eig_sym(x * x.t()).max() + 0.25);
  }
  ASSERT_LT(lambda_max, 50.0);
  const std::string spec = "newton:20:" + std::to_string(1.0 / lambda_max) + ":0.25";
  const auto newton = MakeLearner(spec, s.task);
  const auto ridge = MakeLearner("ridge:0.25", s.task);
  learners::LearnerRun a, b;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const arma::mat x(const_cast<double*>(s.x.slice_memptr(i)), 4, 12, false, true);
    const arma::vec y(const_cast<double*>(s.y.colptr(i)), 12, false, true);
    newton->Run(x, y, a);
    ridge->Run(x, y, b);
    EXPECT_LE(arma::abs(a.weights - b.weights).max(), 1e-11 * (1 + arma::abs(b.weights).max()));
  }
  // Diverges() is the condition C >= 2 / lambda_max(A); beyond it the iterates blow up.
  const arma::mat x = {{3.0, 0.0}, {0.0, 1.0}};  // d = 2, one example per axis; A = diag(9, 1)
  const learners::NewtonLearner inside(30, 0.2, 0.0, "newton:30:0.2"), outside(30, 0.25, 0.0, "x");
  EXPECT_FALSE(inside.Diverges(x * x.t()));               // 0.2 * 9 = 1.8 < 2
  const arma::mat one_example = x.col(0) * x.col(0).t();  // rank 1 < d = 2, lambda = 0
  EXPECT_TRUE(inside.Diverges(one_example));
  EXPECT_TRUE(outside.Diverges(x * x.t()));  // 0.25 * 9 = 2.25
  learners::LearnerRun r;
  outside.Run(arma::join_rows(x, arma::vec{1.0, 1.0}), arma::vec{3.0, 1.0, 0.0}, r);
  // Grown without bound: past float range the products give inf - inf = NaN.
  EXPECT_TRUE(!r.weights.col(2).is_finite() || arma::abs(r.weights.col(2)).max() > 1e6);
  inside.Run(arma::join_rows(x, arma::vec{1.0, 1.0}), arma::vec{3.0, 1.0, 0.0}, r);
  EXPECT_NEAR(r.weights(0, 2), 1.0, 1e-12);  // A^{-1} X^T y = (9/9, 1/1)
  EXPECT_NEAR(r.weights(1, 2), 1.0, 1e-12);
}

// Fu et al.'s newton:K by hand (d = 2): x_1 = (1, 0), x_2 = (1, 1), y = (1, 3). After two
// examples S = X^T X = [[2, 1], [1, 1]], S^2 = [[5, 3], [3, 2]], ||S^2||_F = sqrt(47), so
// alpha = 2 / sqrt(47) and Y_0 = alpha S; one step Y_1 = 2 Y_0 - Y_0 S Y_0 = 2 a S - a^2 S^3
// with S^3 = [[13, 8], [8, 5]]; X^T y = (4, 3), S X^T y = (11, 7), S^3 X^T y = (76, 47):
// w_1 = 2a (11, 7) - a^2 (76, 47). After one example S = x_1 x_1^T has rank 1 and a mu^2 = 2:
// Y_1 = Y_0 (2I - 2P) = 0, so w = 0. Many steps converge to OLS, (1, 2).
TEST(Newton, FuEtAlsScaledStartByHand) {
  const auto newton = MakeLearner("newton:1", Task(2, 3));
  EXPECT_EQ(newton->spec(), "newton:1");
  const arma::mat x = {{1.0, 1.0, 0.0}, {0.0, 1.0, 0.0}};  // columns x_1, x_2, x_3 = 0
  const arma::vec y = {1.0, 3.0, 0.0};
  learners::LearnerRun run;
  newton->Run(x, y, run);
  const double a = 2.0 / std::sqrt(47.0);
  EXPECT_NEAR(run.weights(0, 2), 22 * a - 76 * a * a, 1e-14);
  EXPECT_NEAR(run.weights(1, 2), 14 * a - 47 * a * a, 1e-14);
  EXPECT_NEAR(run.weights(0, 1), 0.0, 1e-15);  // one example: Y_1 = 0
  EXPECT_NEAR(run.weights(1, 1), 0.0, 1e-15);
  const auto many = MakeLearner("newton:40", Task(2, 3));
  many->Run(x, y, run);
  EXPECT_NEAR(run.weights(0, 2), 1.0, 1e-12);
  EXPECT_NEAR(run.weights(1, 2), 2.0, 1e-12);
  EXPECT_FALSE(dynamic_cast<const learners::NewtonLearner&>(*many).Diverges(x * x.t()));
}

TEST(Newton, SpecErrorsSayTheForm) {
  for (const char* bad :
       {"newton:0:0.1", "newton:101:0.1", "newton:3:0", "newton:3:-1", "newton:3:0.1:-0.5",
        "newton:0", "newton:3:0.1:0.2:4", "newton:2.5:0.1", "newton:2.5", "newton"})
    EXPECT_NE(ErrorOf(bad).find("newton:STEPS:C"), std::string::npos) << bad;
}

// One run of an iterative learner with STEPS steps gives every shorter run's predictions: row
// t - 1 of StepPredictions equals Run of the learner with t steps exactly (the same operations
// in the same order, so equality, not a tolerance). Non-iterative learners return nothing.
TEST(StepPredictions, EveryRowIsTheRunWithThatManySteps) {
  const data::PromptSet s = data::SamplePrompts(Task(3, 7, 0.1), 5, 0, 4);
  for (const std::string family : {"gd:0.03:", "newton:", "newton:@:0.05", "newton:@:0.05:0.5"}) {
    auto spec = [&](int t) {
      std::string f = family;
      const auto at = f.find('@');
      return at == std::string::npos ? f + std::to_string(t) : f.replace(at, 1, std::to_string(t));
    };
    const auto longest = MakeLearner(spec(6), s.task);
    for (std::size_t i = 0; i < s.size(); ++i) {
      const arma::mat x(const_cast<double*>(s.x.slice_memptr(i)), 3, 7, false, true);
      const arma::vec y(const_cast<double*>(s.y.colptr(i)), 7, false, true);
      const arma::mat p = longest->StepPredictions(x, y);
      ASSERT_EQ(p.n_rows, 6u);
      ASSERT_EQ(p.n_cols, 7u);
      for (int t = 1; t <= 6; ++t) {
        LearnerRun run;
        MakeLearner(spec(t), s.task)->Run(x, y, run);
        EXPECT_TRUE(arma::all(arma::vectorise(p.row(t - 1) == run.predictions.t())))
            << spec(t) << " prompt " << i;
      }
    }
  }
  LearnerRun run;
  EXPECT_TRUE(
      MakeLearner("ridge:0.1", s.task)->StepPredictions(s.x.slice(0), s.y.col(0)).is_empty());
}
