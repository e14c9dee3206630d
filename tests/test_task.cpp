// Task config and the seeded sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/task.hpp"

using icl::data::PromptSet;
using icl::data::SamplePrompts;
using icl::data::TaskConfig;

namespace {

TaskConfig Task(int d, int n, double noise = 0.0) {
  TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  return t;
}

// Exact by construction: each prompt is drawn by scalar code from a counter-based generator
// keyed by (seed, index), so how many prompts are sampled together does not matter.
void ExpectSamePrompt(const PromptSet& a, std::size_t i, const PromptSet& b, std::size_t j) {
  EXPECT_TRUE(arma::approx_equal(a.x.slice(i), b.x.slice(j), "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.y.col(i), b.y.col(j), "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(a.w.col(i), b.w.col(j), "absdiff", 0.0));
}

}  // namespace

TEST(Sampler, PromptDependsOnlyOnSeedAndIndex) {
  const TaskConfig t = Task(5, 7, 0.3);
  const PromptSet batch = SamplePrompts(t, 42, 0, 100);
  for (std::size_t i = 0; i < 100; ++i)
    ExpectSamePrompt(batch, i, SamplePrompts(t, 42, i, 1), 0);
  for (int i = 99; i >= 0; --i)
    ExpectSamePrompt(batch, i, SamplePrompts(t, 42, i, 1), 0);
  const PromptSet tail = SamplePrompts(t, 42, 37, 20);  // a shard from the middle
  for (std::size_t i = 0; i < 20; ++i)
    ExpectSamePrompt(batch, 37 + i, tail, i);
}

TEST(Sampler, DifferentSeedsAndIndicesDiffer) {
  const TaskConfig t = Task(4, 6);
  const PromptSet a = SamplePrompts(t, 1, 0, 2), b = SamplePrompts(t, 2, 0, 2);
  EXPECT_FALSE(arma::approx_equal(a.x.slice(0), b.x.slice(0), "absdiff", 1e-12));
  EXPECT_FALSE(arma::approx_equal(a.x.slice(0), a.x.slice(1), "absdiff", 1e-12));
}

TEST(Sampler, LabelsFollowTheLinearModel) {
  const PromptSet s = SamplePrompts(Task(6, 9), 3, 0, 10);
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int j = 0; j < 9; ++j)
      EXPECT_NEAR(s.y(j, i), arma::dot(s.w.col(i), s.x.slice(i).col(j)), 1e-12);
}

TEST(Sampler, MomentsMatchTheTaskDistribution) {
  TaskConfig t = Task(4, 10, 0.5);
  t.w_scale = 2.0;
  const PromptSet s = SamplePrompts(t, 9, 0, 4000);
  const arma::vec xs = arma::vectorise(s.x);
  EXPECT_NEAR(arma::mean(xs), 0.0, 0.01);
  EXPECT_NEAR(arma::var(xs), 1.0, 0.01);
  EXPECT_NEAR(arma::var(arma::vectorise(s.w)), 4.0, 0.15);
  // y - w.x is the noise: variance sigma^2.
  arma::vec resid(s.size() * 10);
  for (std::size_t i = 0; i < s.size(); ++i)
    resid.subvec(i * 10, i * 10 + 9) = s.y.col(i) - s.x.slice(i).t() * s.w.col(i);
  EXPECT_NEAR(arma::var(resid), 0.25, 0.01);
}

TEST(Sampler, ShorterPromptsArePrefixesOfLongerOnes) {
  const PromptSet a = SamplePrompts(Task(3, 5, 0.1), 4, 0, 3),
                  b = SamplePrompts(Task(3, 12, 0.1), 4, 0, 3);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(arma::approx_equal(a.x.slice(i), b.x.slice(i).cols(0, 4), "absdiff", 0.0));
    EXPECT_TRUE(arma::approx_equal(a.y.col(i), b.y.col(i).head(5), "absdiff", 0.0));
  }
}

TEST(Sampler, FixedWControlUsesAllOnesAndTheSameInputs) {
  TaskConfig fixed = Task(4, 6);
  fixed.fixed_w = true;
  const PromptSet a = SamplePrompts(Task(4, 6), 5, 0, 3), b = SamplePrompts(fixed, 5, 0, 3);
  EXPECT_TRUE(arma::all(arma::vectorise(b.w) == 1.0));
  EXPECT_TRUE(arma::approx_equal(a.x, b.x, "absdiff", 0.0));
}

TEST(TaskConfig, JsonRoundTripAndValidation) {
  TaskConfig t = Task(7, 11, 0.25);
  t.w_scale = 1.5;
  t.fixed_w = true;
  EXPECT_EQ(TaskConfig::FromJson(t.ToJson(), "test"), t);
  EXPECT_DOUBLE_EQ(t.BayesLambda(), 0.25 * 0.25 / 2.25);
  EXPECT_THROW(Task(0, 3).Validate(), std::invalid_argument);
  EXPECT_THROW(Task(3, -1).Validate(), std::invalid_argument);
  EXPECT_THROW(Task(3, 3, -0.1).Validate(), std::invalid_argument);
  EXPECT_THROW(TaskConfig::FromJson("{\"d\": 3}", "attr"), std::invalid_argument);
  EXPECT_THROW(TaskConfig::FromJson("not json", "attr"), std::invalid_argument);
}

// Garg et al.'s curriculum: the first d_effective coordinates are those of the full task (one
// random stream for any d_effective), the rest are zero in x and w, and y = x'w + noise still.
TEST(Sampler, EffectiveDimensionsZeroTheRestOfTheSameStream) {
  TaskConfig full = Task(5, 9, 0.2);
  TaskConfig part = full;
  part.d_effective = 3;
  const PromptSet a = SamplePrompts(full, 7, 0, 20), b = SamplePrompts(part, 7, 0, 20);
  for (std::size_t i = 0; i < 20; ++i) {
    EXPECT_TRUE(
        arma::approx_equal(a.x.slice(i).rows(0, 2), b.x.slice(i).rows(0, 2), "absdiff", 0.0));
    EXPECT_TRUE(arma::approx_equal(a.w.col(i).rows(0, 2), b.w.col(i).rows(0, 2), "absdiff", 0.0));
    EXPECT_EQ(arma::abs(b.x.slice(i).rows(3, 4)).max(), 0.0);
    EXPECT_EQ(arma::abs(b.w.col(i).rows(3, 4)).max(), 0.0);
    // y keeps the same noise draw: y_part - x_part'w_part == y_full - x_full'w_full.
    const arma::vec ra = a.y.col(i) - a.x.slice(i).t() * a.w.col(i);
    const arma::vec rb = b.y.col(i) - b.x.slice(i).t() * b.w.col(i);
    EXPECT_LT(arma::abs(ra - rb).max(), 1e-12);
  }
}

TEST(TaskConfig, EffectiveDimensionsRoundTripAndStayOutOfFullTasks) {
  TaskConfig t = Task(5, 9);
  EXPECT_EQ(t.ToJson().find("d_effective"), std::string::npos);  // old files keep their bytes
  t.d_effective = 2;
  const TaskConfig back = TaskConfig::FromJson(t.ToJson(), "test");
  EXPECT_EQ(back.d_effective, 2);
  EXPECT_EQ(back, t);
  TaskConfig same_as_full = Task(5, 9);
  same_as_full.d_effective = 5;
  EXPECT_EQ(same_as_full, Task(5, 9));
  EXPECT_NE(back, Task(5, 9));
  t.d_effective = 6;
  EXPECT_THROW(t.Validate(), std::invalid_argument);
  EXPECT_THROW(
      TaskConfig::FromJson(R"({"d":5,"n":9,"w_scale":1,"noise":0,"d_effective":0})", "test"),
      std::invalid_argument);
}

// Out-of-distribution prompts (data/shift.hpp).
namespace {

TaskConfig Shifted(int d, int n, const std::string& context, const std::string& query = "same",
                   double noise = 0.0) {
  TaskConfig t = Task(d, n, noise);
  t.context_shift = icl::data::ParseShift(context, "context_shift");
  t.query_shift = icl::data::ParseShift(query, "query_shift");
  t.Validate();
  return t;
}

std::string ShiftError(int d, const std::string& context, const std::string& query = "same") {
  try {
    Shifted(d, 5, context, query);
  } catch (const icl::core::InputError& e) {
    return std::string(e.field()) + ": " + e.what();
  }
  return "(accepted)";
}

// A random orthonormal basis: columns orthonormal to working precision (MGS twice: ~1e-15 per
// entry; bound 1e-13), and a basis of cols columns is the first cols columns of the square one
// from the same seed and stream, bit for bit (the draws are filled column by column and each
// column is orthogonalised against the earlier ones only).
TEST(RandomOrthonormal, IsOrthonormalAndThePrefixOfTheSquareOne) {
  const arma::mat q = icl::data::RandomOrthonormal(12, 5, 3, 17),
                  full = icl::data::RandomOrthonormal(12, 12, 3, 17);
  EXPECT_LE(arma::abs(q.t() * q - arma::eye(5, 5)).max(), 1e-13);
  EXPECT_LE(arma::abs(full.t() * full - arma::eye(12, 12)).max(), 1e-13);
  EXPECT_TRUE(arma::all(arma::vectorise(q == full.head_cols(5))));
  EXPECT_FALSE(arma::approx_equal(q, icl::data::RandomOrthonormal(12, 5, 3, 18), "absdiff", 0.1));
  EXPECT_THROW(icl::data::RandomOrthonormal(3, 4, 1, 1), std::invalid_argument);
}

}  // namespace

TEST(Shift, SpecsRoundTripAndBadOnesAreNamed) {
  for (const std::string spec : {"none", "skewed", "scale:2", "scale:0.5", "half-subspace",
                                 "half-subspace:3", "orthant:+", "orthant:-", "y-scale:3"})
    EXPECT_EQ(icl::data::ParseShift(spec, "context_shift").Spec(), spec);
  EXPECT_EQ(icl::data::ParseShift("orthant", "f").Spec(), "orthant:+");
  EXPECT_EQ(icl::data::ParseShift("orthogonal", "f").Spec(), "orthogonal");
  EXPECT_NE(ShiftError(8, "scale:0").find("context_shift: "), std::string::npos);
  EXPECT_NE(ShiftError(8, "scale:0").find("positive finite"), std::string::npos);
  EXPECT_NE(ShiftError(8, "scale:nan").find("positive finite"), std::string::npos);
  EXPECT_NE(ShiftError(8, "scale:-2").find("positive finite"), std::string::npos);
  EXPECT_NE(ShiftError(8, "y-scale:inf").find("positive finite"), std::string::npos);
  EXPECT_NE(ShiftError(8, "half-subspace:9").find("half-subspace of 9 dimensions in d = 8"),
            std::string::npos);
  EXPECT_NE(ShiftError(8, "half-subspace:8").find("expected 1..d - 1"), std::string::npos);
  EXPECT_NE(ShiftError(1, "half-subspace").find("d >= 2"), std::string::npos);
  EXPECT_NE(ShiftError(8, "orthant:x").find("SIGN must be + or -"), std::string::npos);
  EXPECT_NE(ShiftError(8, "tilt").find("expected none, same"), std::string::npos);
  EXPECT_NE(ShiftError(8, "orthogonal").find("is a query shift only"), std::string::npos);
  EXPECT_NE(ShiftError(8, "same").find("is a query shift only"), std::string::npos);
  EXPECT_NE(ShiftError(8, "none", "y-scale:2").find("query_shift: "), std::string::npos);
  EXPECT_NE(ShiftError(8, "none", "y-scale:2").find("give it as the context shift"),
            std::string::npos);
}

TEST(Shift, RecordedInTheTaskConfigAndAbsentWithout) {
  const TaskConfig plain = Task(4, 6);
  EXPECT_EQ(plain.ToJson().find("shift"), std::string::npos);  // old files keep their bytes
  const TaskConfig t = Shifted(4, 6, "half-subspace:2", "orthogonal");
  const TaskConfig back = TaskConfig::FromJson(t.ToJson(), "test");
  EXPECT_TRUE(back == t);
  EXPECT_FALSE(back == plain);
  EXPECT_EQ(back.context_shift.Spec(), "half-subspace:2");
  EXPECT_TRUE(back.HasQueries());
  EXPECT_THROW(TaskConfig::FromJson(
                   R"({"d":4,"n":6,"w_scale":1,"noise":0,"context_shift":"scale:0"})", "f.h5"),
               icl::core::InputError);
}

// Known answers by construction: a shift transforms the same draws, so scaling by 2 (exact in
// binary floating point) doubles x and the noiseless labels bit for bit, the orthant takes
// absolute values, y-scale multiplies the very label the unshifted prompt has, and a query shift
// leaves the context untouched.
TEST(Shift, TransformsTheSameDraws) {
  const PromptSet base = SamplePrompts(Task(5, 7, 0.3), 11, 0, 20);
  const PromptSet twice = SamplePrompts(Shifted(5, 7, "scale:2"), 11, 0, 20);
  const PromptSet pos = SamplePrompts(Shifted(5, 7, "orthant:+", "same", 0.3), 11, 0, 20);
  const PromptSet neg = SamplePrompts(Shifted(5, 7, "orthant:-", "same", 0.3), 11, 0, 20);
  const PromptSet ys = SamplePrompts(Shifted(5, 7, "y-scale:3", "same", 0.3), 11, 0, 20);
  const PromptSet q = SamplePrompts(Shifted(5, 7, "none", "none", 0.3), 11, 0, 20);
  const PromptSet noiseless = SamplePrompts(Task(5, 7), 11, 0, 20);
  EXPECT_TRUE(arma::approx_equal(twice.x, 2 * noiseless.x, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(twice.y, 2 * noiseless.y, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(pos.x, arma::abs(base.x), "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(neg.x, -arma::abs(base.x), "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(ys.x, base.x, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(ys.y, 3 * base.y, "absdiff", 0.0));
  for (std::size_t i = 0; i < base.size(); ++i)
    ExpectSamePrompt(base, i, q, i);
  ASSERT_EQ(q.query_x.n_slices, 20u);
  EXPECT_FALSE(arma::approx_equal(q.query_x, q.x, "absdiff", 1e-3));  // drawn apart
  // A query's label follows the prompt's w (and noise).
  const arma::vec w = q.w.col(3);
  const arma::vec x = q.query_x.slice(3).col(4);
  EXPECT_NEAR(q.query_y(4, 3), arma::dot(w, x), 5 * 0.3);
}

TEST(Shift, SubspacesAndSkewAreWhatTheySay) {
  const int d = 6, N = 20000;
  const std::vector<double> basis = icl::data::ShiftBasis(d);
  const arma::mat Q(basis.data(), d, d);
  // Orthonormal to the rounding of d-term dot products in double.
  EXPECT_LT(arma::abs(Q.t() * Q - arma::eye(d, d)).max(), 1e-14 * d);
  EXPECT_EQ(icl::data::ShiftBasis(d), basis);  // the same basis every time
  const PromptSet half = SamplePrompts(Shifted(d, 4, "half-subspace:2"), 5, 0, 50);
  for (std::size_t i = 0; i < half.size(); ++i) {
    const arma::mat c = Q.cols(2, d - 1).t() * half.x.slice(i);  // outside the subspace
    EXPECT_LT(arma::abs(c).max(), 1e-14 * d * (1 + arma::abs(half.x.slice(i)).max()));
  }
  // Skewed: the coordinates in the basis have variances lambda_i = d / H_d / (i + 1), whose
  // sum is d. Each sample mean of z_i^2 lambda_i over N draws has standard error
  // lambda_i sqrt(2 / N): 5 standard errors.
  const PromptSet skew = SamplePrompts(Shifted(d, 1, "skewed"), 9, 0, N);
  const arma::mat xs = arma::reshape(arma::mat(skew.x.memptr(), d, N), d, N);
  const arma::mat c = Q.t() * xs;
  double harmonic = 0;
  for (int i = 0; i < d; ++i)
    harmonic += 1.0 / (i + 1);
  for (int i = 0; i < d; ++i) {
    const double lambda = d / harmonic / (i + 1);
    EXPECT_NEAR(arma::mean(arma::square(c.row(i))), lambda, 5 * lambda * std::sqrt(2.0 / N)) << i;
  }
}

TEST(Shift, OrthogonalQueriesAreOrthogonalWhereTheyCanBe) {
  const int d = 4, n = 7;
  const PromptSet s = SamplePrompts(Shifted(d, n, "none", "orthogonal"), 3, 0, 30);
  const PromptSet half = SamplePrompts(Shifted(d, n, "half-subspace:2", "orthogonal"), 3, 0, 30);
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int k = 0; k < n; ++k) {
      const arma::vec q = s.query_x.slice(i).col(k), qh = half.query_x.slice(i).col(k);
      double most = 0, most_h = 0;
      for (int j = 0; j < k; ++j) {
        const arma::vec xj = s.x.slice(i).col(j), xh = half.x.slice(i).col(j);
        most = std::max(most, std::abs(arma::dot(q, xj)) / (arma::norm(q) * arma::norm(xj)));
        most_h = std::max(most_h, std::abs(arma::dot(qh, xh)) / (arma::norm(qh) * arma::norm(xh)));
      }
      // Gram-Schmidt in double: orthogonal to ~1e-15 per step, k <= d steps.
      if (k < d) {
        EXPECT_LT(most, 1e-13) << i << " " << k;
      }
      // k >= d examples span R^4: the query is an ordinary draw, not orthogonal.
      if (k >= d && i == 0) {
        EXPECT_GT(most, 1e-3) << k;
      }
      // A context in a 2-dimensional subspace never spans R^4: orthogonal at every k.
      EXPECT_LT(most_h, 1e-13) << i << " " << k;
    }
}
