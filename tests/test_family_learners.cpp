// The task families' Bayes-optimal learners against brute-force and closed-form answers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.hpp"
#include "data/task.hpp"
#include "learners/classical.hpp"
#include "learners/task_family_learners.hpp"

using icl::data::ParseTaskFamily;
using icl::data::TaskConfig;
using icl::learners::DmmseLearner;
using icl::learners::LearnerRun;

namespace {

TaskConfig PoolTask(int d, int n, const std::string& family, double noise) {
  TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  t.family = ParseTaskFamily(family);
  return t;
}

}  // namespace

// M = 3, d = 2, sigma = 0.5, by the definition written out term by term in long double: the
// learner's log-space arithmetic agrees to float64 rounding. The posterior weights are within a
// few ulp of each other's exponentials; a weighted sum of three O(1) members then carries an
// error of a few ulp of 1 (2.2e-16 each), so 1e-14 is that bound with room for the residual sums.
TEST(Dmmse, EqualsTheBruteForcePosteriorOnATinyPool) {
  const arma::mat pool = {{1.0, -0.5, 2.0}, {0.3, 1.5, -1.0}};  // d x M
  const arma::mat x = {{0.2, -1.1, 0.7, 1.3}, {0.9, 0.4, -0.6, 0.1}};
  const arma::vec y = {0.5, -0.2, 1.4, 0.3};
  const double sigma = 0.5;
  LearnerRun run;
  DmmseLearner(pool, sigma).Run(x, y, run);
  for (int k = 0; k < 4; ++k) {
    long double z = 0, w0 = 0, w1 = 0;
    for (int m = 0; m < 3; ++m) {
      long double r = 0;
      for (int j = 0; j < k; ++j) {
        const long double e =
            y(j) - (pool(0, m) * (long double)x(0, j) + pool(1, m) * (long double)x(1, j));
        r += e * e;
      }
      const long double p = std::exp(-r / (2 * sigma * sigma));
      z += p, w0 += p * pool(0, m), w1 += p * pool(1, m);
    }
    EXPECT_NEAR(run.weights(0, k), double(w0 / z), 1e-14) << k;
    EXPECT_NEAR(run.weights(1, k), double(w1 / z), 1e-14) << k;
    EXPECT_NEAR(run.predictions(k), double((w0 * x(0, k) + w1 * x(1, k)) / z), 1e-14) << k;
  }
  // No example: the pool's mean.
  EXPECT_NEAR(run.weights(0, 0), 2.5 / 3, 1e-15);
}

// A pool of several blocks (M = 2,500, d = 3), on prompts drawn from it, against the definition
// summed over every member in long double: the learner leaves out members whose weight is below
// 2^-53 / M of the best one's (all of them together less than 2^-53 of Z) and, once a member's
// residual sum has passed that reach for good, stops computing it. What it leaves out moves the
// result by at most 2^-53 max|w_m|; summing M weighted terms in float64 adds at most M u max|w_m|
// (u = 2^-53, recursive summation), so 2 M u max|w_m| bounds the difference.
TEST(Dmmse, LeavingOutMembersOutOfReachChangesNothingBeyondRounding) {
  const TaskConfig task = PoolTask(3, 12, "pool:2500:4", 0.3);
  const auto set = icl::data::SamplePrompts(task, 3, 0, 6);
  const arma::mat pool = icl::data::PoolMembers(task.family, 3, 3, 1.0);
  const double bound = 2 * 2500 * std::ldexp(1.0, -53) * arma::abs(pool).max();
  const double sigma = 0.3;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const arma::mat x = set.x.slice(i);
    const arma::vec y = set.y.col(i);
    LearnerRun run;
    DmmseLearner(pool, sigma).Run(x, y, run);
    for (int k = 0; k < 12; ++k) {
      std::vector<long double> r(pool.n_cols, 0.0L);
      long double least = 1e300L;
      for (arma::uword m = 0; m < pool.n_cols; ++m) {
        for (int j = 0; j < k; ++j) {
          long double f = 0;
          for (int c = 0; c < 3; ++c)
            f += (long double)pool(c, m) * x(c, j);
          r[m] += (y(j) - f) * (y(j) - f);
        }
        least = std::min(least, r[m]);
      }
      long double z = 0, w[3] = {0, 0, 0};
      for (arma::uword m = 0; m < pool.n_cols; ++m) {
        const long double p = std::exp(-(r[m] - least) / (2 * sigma * sigma));
        z += p;
        for (int c = 0; c < 3; ++c)
          w[c] += p * pool(c, m);
      }
      for (int c = 0; c < 3; ++c)
        EXPECT_NEAR(run.weights(c, k), double(w[c] / z), bound) << i << " k " << k;
    }
    // By k = 11 the prompt's own member dominates: the posterior has found it.
    EXPECT_LT(arma::norm(run.weights.col(11) - set.w.col(i)), 0.5) << i;
  }
}

TEST(Dmmse, APoolOfOnePredictsItsMember) {
  const arma::mat pool = arma::vec{0.7, -1.2, 0.4};  // d x M = 3 x 1
  arma::mat x(3, 5, arma::fill::randn);
  arma::vec y(5, arma::fill::randn);
  for (double sigma : {0.0, 0.3}) {
    LearnerRun run;
    DmmseLearner(pool, sigma).Run(x, y, run);
    for (int k = 0; k < 5; ++k) {
      EXPECT_TRUE(arma::approx_equal(run.weights.col(k), pool.col(0), "absdiff", 0.0));
      EXPECT_NEAR(run.predictions(k), arma::dot(pool.col(0), x.col(k)), 1e-15);
    }
  }
}

// sigma = 0 is the limit sigma -> 0: once the examples single out the prompt's own member, the
// learner is that member exactly; with no example it is the pool's mean.
TEST(Dmmse, NoiselessLimitFindsThePromptsMember) {
  const TaskConfig task = PoolTask(4, 6, "pool:64:2", 0.0);
  const auto set = icl::data::SamplePrompts(task, 1, 0, 20);
  const auto learner = icl::learners::MakeLearner("dmmse", task);
  const arma::mat members = icl::data::PoolMembers(task.family, 4, 4, 1.0);
  for (std::size_t i = 0; i < set.size(); ++i) {
    LearnerRun run;
    icl::learners::RunOnPrompt(*learner, set, i, run);
    EXPECT_TRUE(arma::approx_equal(run.weights.col(0), arma::mean(members, 1), "absdiff", 1e-15));
    // One noiseless example of a Gaussian pool leaves one consistent member (almost surely).
    for (int k = 1; k < 6; ++k)
      EXPECT_TRUE(arma::approx_equal(run.weights.col(k), set.w.col(i), "absdiff", 0.0)) << k;
  }
}

// A large pool drawn from the prior approaches the Gaussian-prior posterior mean, ridge with
// lambda = sigma^2 / tau^2, at small k (d = 2, k <= 2). The dMMSE is a self-normalised
// importance-sampling estimate of that mean with the prior as proposal: its error has standard
// deviation about sqrt(tr Sigma_post / ESS), Sigma_post = sigma^2 (X'X + lambda I)^-1 and ESS =
// 1 / sum p_m^2, both computed here; 6 such deviations bound it with probability ~1 - 1e-8.
TEST(Dmmse, ALargePoolApproachesTheBayesRidgeAtSmallK) {
  const double sigma = 0.5, lambda = sigma * sigma;
  const TaskConfig task = PoolTask(2, 3, "pool:16384:5", sigma);
  const auto learner = icl::learners::MakeLearner("dmmse", task);
  const auto ridge = icl::learners::MakeLearner("bayes", task);
  const arma::mat members = icl::data::PoolMembers(task.family, 2, 2, 1.0);
  TaskConfig gauss = task;
  gauss.family = {};
  const auto set = icl::data::SamplePrompts(gauss, 8, 0, 10);
  for (std::size_t i = 0; i < set.size(); ++i) {
    LearnerRun a, b;
    icl::learners::RunOnPrompt(*learner, set, i, a);
    icl::learners::RunOnPrompt(*ridge, set, i, b);
    const arma::mat x = set.x.slice(i);
    for (int k = 1; k <= 2; ++k) {
      const arma::mat xk = x.cols(0, k - 1);
      const arma::vec yk = set.y.col(i).head(k);
      arma::vec logp(members.n_cols);
      for (arma::uword m = 0; m < members.n_cols; ++m)
        logp(m) = -arma::accu(arma::square(yk - xk.t() * members.col(m))) / (2 * lambda);
      const arma::vec p = arma::exp(logp - logp.max()) / arma::accu(arma::exp(logp - logp.max()));
      const double ess = 1.0 / arma::accu(arma::square(p));
      const arma::mat post = lambda * arma::inv_sympd(xk * xk.t() + lambda * arma::eye(2, 2));
      const double bound = 6 * std::sqrt(arma::trace(post) / ess);
      EXPECT_LT(arma::norm(a.weights.col(k) - b.weights.col(k)), bound) << i << " k " << k;
      EXPECT_GT(ess, 100.0);  // the bound means something only for a well-spread posterior
    }
  }
}

TEST(Dmmse, NeedsAPoolTask) {
  TaskConfig gauss;
  try {
    icl::learners::MakeLearner("dmmse", gauss, "algorithms");
    FAIL() << "accepted";
  } catch (const icl::core::InputError& e) {
    EXPECT_EQ(e.field(), "algorithms");
    EXPECT_NE(e.text().find("pool"), std::string::npos) << e.text();
  }
  EXPECT_THROW(icl::learners::MakeLearner("dmmse:3", PoolTask(4, 6, "pool:4", 0), "learners"),
               icl::core::InputError);
}

// With one noise level the mixture's posterior is that level with certainty, and its mean is
// ridge with lambda = sigma^2 / tau^2: the same d x d solve, so agreement to a few ulp of the
// weights (O(1) here); 1e-12 leaves room for the two factorisations' different rounding.
TEST(BayesMix, OneNoiseLevelIsTheBayesRidge) {
  TaskConfig task = PoolTask(3, 8, "noise-mix:0.5", 0);
  task.w_scale = 2.0;
  const auto mix = icl::learners::MakeLearner("bayes-mix", task);
  const icl::learners::RidgeLearner ridge(0.25 / 4.0, "ridge");
  const auto set = icl::data::SamplePrompts(task, 3, 0, 10);
  for (std::size_t i = 0; i < set.size(); ++i) {
    LearnerRun a, b;
    icl::learners::RunOnPrompt(*mix, set, i, a);
    icl::learners::RunOnPrompt(ridge, set, i, b);
    EXPECT_TRUE(arma::approx_equal(a.weights, b.weights, "absdiff", 1e-12)) << i;
  }
}

// Two levels far apart: a prompt's posterior after all its examples puts almost all weight on
// the level it drew (the evidence of 8 labels tells sigma = 0.05 from sigma = 2 with odds beyond
// 1e6 on every one of these prompts), and the posterior sums to 1 at every k.
TEST(BayesMix, PosteriorFindsThePromptsNoiseLevel) {
  const TaskConfig task = PoolTask(2, 9, "noise-mix:0.05,2", 0);
  const icl::learners::BayesMixLearner mix({0.05, 2.0}, {}, 1.0);
  const auto set = icl::data::SamplePrompts(task, 5, 0, 20);
  for (std::size_t i = 0; i < set.size(); ++i) {
    const arma::mat post = mix.Posterior(set.x.slice(i), set.y.col(i));
    for (arma::uword k = 0; k < post.n_cols; ++k)
      EXPECT_NEAR(arma::accu(post.col(k)), 1.0, 1e-15);
    EXPECT_NEAR(post(0, 0), 0.5, 1e-15);  // no example: the prior
    EXPECT_GT(post(arma::uword(set.draw[i]), 8), 1 - 1e-6) << i;
  }
}

// The oracle runs, on each prompt, the ridge of the level that prompt drew (lambda = sigma_c^2 /
// tau^2): bit for bit the same arithmetic as that ridge run alone. Prompts without a recorded
// level, a task that is not a noise mixture, and a run without the prompt's draw are refused.
TEST(OracleRidge, RunsEachPromptsOwnLevel) {
  TaskConfig task = PoolTask(3, 8, "noise-mix:0,0.5,2", 0);
  task.w_scale = 2.0;
  const auto oracle = icl::learners::MakeLearner("oracle-ridge", task);
  EXPECT_EQ(oracle->spec(), "oracle-ridge");
  const auto set = icl::data::SamplePrompts(task, 4, 0, 30);
  const std::vector<double> lambdas = {0.0, 0.25 / 4.0, 4.0 / 4.0};
  std::vector<int> seen(3, 0);
  for (std::size_t i = 0; i < set.size(); ++i) {
    const auto c = static_cast<std::size_t>(set.draw[i]);
    ASSERT_LT(c, 3u);
    ++seen[c];
    const icl::learners::RidgeLearner ridge(lambdas[c], "ridge");
    LearnerRun a, b;
    icl::learners::RunOnPrompt(*oracle, set, i, a);
    icl::learners::RunOnPrompt(ridge, set, i, b);
    EXPECT_TRUE(arma::approx_equal(a.weights, b.weights, "absdiff", 0.0)) << i;
    EXPECT_TRUE(arma::approx_equal(a.predictions, b.predictions, "absdiff", 0.0)) << i;
  }
  for (int c = 0; c < 3; ++c)
    EXPECT_GT(seen[c], 0) << "level " << c << " never drawn in 30 prompts";
  LearnerRun r;
  EXPECT_THROW(oracle->Run(set.x.slice(0), set.y.col(0), r), icl::core::InputError);
  const auto gaussian = icl::data::SamplePrompts(PoolTask(3, 8, "gaussian", 0.5), 4, 0, 2);
  EXPECT_THROW(icl::learners::RunOnPrompt(*oracle, gaussian, 0, r), icl::core::InputError);
  EXPECT_THROW(icl::learners::MakeLearner("oracle-ridge", PoolTask(3, 8, "gaussian", 0.5)),
               icl::core::InputError);
  EXPECT_THROW(icl::learners::MakeLearner("oracle-ridge:1", task), icl::core::InputError);
}

// S = d: the only support is every coordinate, and the posterior mean is ridge.
TEST(BayesSparse, FullSupportIsTheBayesRidge) {
  const TaskConfig task = PoolTask(3, 8, "sparse:3", 0.5);
  const auto sparse = icl::learners::MakeLearner("bayes-sparse", task);
  const auto ridge = icl::learners::MakeLearner("bayes", task);
  const auto set = icl::data::SamplePrompts(task, 4, 0, 10);
  for (std::size_t i = 0; i < set.size(); ++i) {
    LearnerRun a, b;
    icl::learners::RunOnPrompt(*sparse, set, i, a);
    icl::learners::RunOnPrompt(*ridge, set, i, b);
    EXPECT_TRUE(arma::approx_equal(a.weights, b.weights, "absdiff", 1e-12)) << i;
  }
}

// d = 3, S = 1, by the definition: three supports, each a one-dimensional ridge with its own
// evidence, computed here in closed form (scalars).
TEST(BayesSparse, EqualsTheBruteForcePosteriorOverSupports) {
  const arma::mat x = {{0.3, -1.2, 0.8, 0.5}, {1.1, 0.2, -0.4, 0.9}, {-0.7, 0.6, 1.5, -0.2}};
  const arma::vec y = {0.4, -0.9, 1.3, 0.2};
  const double sigma = 0.6, tau = 1.5, lambda = sigma * sigma / (tau * tau);
  const icl::learners::BayesSparseLearner learner(3, 1, sigma, tau);
  LearnerRun run;
  learner.Run(x, y, run);
  for (int k = 0; k < 4; ++k) {
    arma::vec mean(3, arma::fill::zeros), logw(3);
    for (int c = 0; c < 3; ++c) {
      double g = 0, b = 0, yy = 0;
      for (int j = 0; j < k; ++j)
        g += x(c, j) * x(c, j), b += x(c, j) * y(j), yy += y(j) * y(j);
      // y ~ N(0, sigma^2 I + tau^2 x_c x_c'): det = sigma^(2k) (1 + g / lambda), quadratic form
      // (yy - b^2 / (g + lambda)) / sigma^2.
      logw(c) = -0.5 * (std::log1p(g / lambda) + (yy - b * b / (g + lambda)) / (sigma * sigma));
    }
    const arma::vec p = arma::exp(logw - logw.max()) / arma::accu(arma::exp(logw - logw.max()));
    for (int c = 0; c < 3; ++c) {
      double g = 0, b = 0;
      for (int j = 0; j < k; ++j)
        g += x(c, j) * x(c, j), b += x(c, j) * y(j);
      mean(c) = p(c) * b / (g + lambda);
    }
    EXPECT_TRUE(arma::approx_equal(run.weights.col(k), mean, "absdiff", 1e-13)) << k;
  }
}

TEST(TaskFamilyLearners, RefuseTasksTheyAreNotFor) {
  for (const auto& [spec, family, noise] :
       std::vector<std::tuple<std::string, std::string, double>>{
           {"bayes-mix", "gaussian", 0.5},
           {"bayes-mix", "noise-mix:0,1", 0},
           {"bayes-sparse", "gaussian", 0.5},
           {"bayes-sparse", "sparse:2", 0.0}}) {
    try {
      icl::learners::MakeLearner(spec, PoolTask(4, 6, family, noise), "algorithms");
      ADD_FAILURE() << spec << " accepted on " << family;
    } catch (const icl::core::InputError& e) {
      EXPECT_EQ(e.field(), "algorithms") << spec;
    }
  }
  TaskConfig wide = PoolTask(40, 6, "sparse:10", 0.5);  // C(40, 10) = 847,660,528 supports
  EXPECT_THROW(icl::learners::MakeLearner("bayes-sparse", wide), icl::core::InputError);
}

// The KKT conditions of (1/2)||y - Xw||^2 + lambda ||w||_1 at every k, to 1e-8 (the sweeps stop
// when no coordinate moves by 1e-15 of the weights, far inside that).
TEST(Lasso, SatisfiesItsKktConditions) {
  TaskConfig task = PoolTask(8, 16, "sparse:2", 0.1);
  const auto set = icl::data::SamplePrompts(task, 6, 0, 10);
  for (double lambda : {0.05, 0.5, 3.0}) {
    const icl::learners::LassoLearner lasso(lambda, "lasso");
    for (std::size_t i = 0; i < set.size(); ++i) {
      LearnerRun run;
      lasso.Run(set.x.slice(i), set.y.col(i), run);
      for (int k = 1; k < 16; ++k) {
        const arma::mat xk = set.x.slice(i).cols(0, k - 1);
        const arma::vec g = xk * (set.y.col(i).head(k) - xk.t() * run.weights.col(k));
        for (int r = 0; r < 8; ++r) {
          const double w = run.weights(r, k);
          if (w != 0)
            EXPECT_NEAR(g(r), lambda * (w > 0 ? 1 : -1), 1e-8) << lambda << " " << k;
          else
            EXPECT_LE(std::abs(g(r)), lambda + 1e-8) << lambda << " " << k;
        }
      }
    }
  }
}

// lambda -> 0 with k > d: the unique least-squares solution. At lambda = 1e-12 the lasso differs
// from OLS by about lambda ||(X'X)^-1|| (under 1e-9 for these well-conditioned 12-example
// designs), so 1e-7 bounds it with the coordinate descent's own stopping error.
TEST(Lasso, ApproachesOlsAsLambdaVanishes) {
  const TaskConfig task = PoolTask(4, 14, "gaussian", 0.2);
  const auto set = icl::data::SamplePrompts(task, 7, 0, 10);
  const icl::learners::LassoLearner lasso(1e-12, "lasso");
  const auto ols = icl::learners::MakeLearner("ols", task);
  for (std::size_t i = 0; i < set.size(); ++i) {
    LearnerRun a, b;
    lasso.Run(set.x.slice(i), set.y.col(i), a);
    ols->Run(set.x.slice(i), set.y.col(i), b);
    for (int k = 8; k < 14; ++k)
      EXPECT_TRUE(arma::approx_equal(a.weights.col(k), b.weights.col(k), "absdiff", 1e-7)) << k;
  }
  EXPECT_THROW(icl::learners::MakeLearner("lasso:-1", task), icl::core::InputError);
  EXPECT_EQ(icl::learners::MakeLearner("lasso:0.1", task)->spec(), "lasso:0.1");
}
