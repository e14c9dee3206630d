// Task config and the seeded sampler.
#include <gtest/gtest.h>

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
