// Task families: their specs, ranges and what their prompts draw.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/task.hpp"

using icl::data::ParseTaskFamily;
using icl::data::PromptSet;
using icl::data::SamplePrompts;
using icl::data::TaskConfig;
using icl::data::TaskFamily;

namespace {

TaskConfig Task(int d, int n, const std::string& family, double noise = 0.0) {
  TaskConfig t;
  t.d = d;
  t.n = n;
  t.noise = noise;
  t.family = ParseTaskFamily(family);
  return t;
}

// The setting a spec or task is refused under, or "accepted".
std::string Refusal(const std::string& family, int d = 4, double noise = 0.0) {
  try {
    Task(d, 6, family, noise).Validate();
  } catch (const icl::core::InputError& e) {
    return e.field();
  }
  return "accepted";
}

}  // namespace

TEST(TaskFamily, SpecsReadBackToTheSameFamily) {
  for (const std::string spec : {"gaussian", "pool:8:1", "pool:1048576:7", "noise-mix:0.1,1",
                                 "noise-mix:0,0.5,2:0.25,0.25,0.5", "sparse:2"}) {
    const TaskFamily f = ParseTaskFamily(spec);
    EXPECT_EQ(f.Spec(), spec);
    EXPECT_EQ(ParseTaskFamily(f.Spec()), f) << spec;
  }
  EXPECT_EQ(ParseTaskFamily("pool:8").Spec(), "pool:8:1");  // the pool seed's default
}

TEST(TaskFamily, BadSpecsAndRangesAreRefusedNamingTheSetting) {
  for (const std::string spec :
       {"pool:0", "pool:1048577", "pool:3.5", "pool:8:-1", "noise-mix:0.1,-1", "noise-mix:0.1,inf",
        "noise-mix:0.1,nan", "noise-mix:0.1,1:0.5,0.6", "noise-mix:0.1,1:0.5",
        "noise-mix:", "sparse:0", "sparse:5", "lasso", "pool", "gaussian:1"})
    EXPECT_EQ(Refusal(spec), "task_family") << spec;
  EXPECT_EQ(Refusal("noise-mix:0.1,1", 4, /*noise=*/0.5), "noise");
  TaskConfig fixed = Task(4, 6, "pool:4");
  fixed.fixed_w = true;
  EXPECT_THROW(fixed.Validate(), icl::core::InputError);
  EXPECT_EQ(Refusal("sparse:4"), "accepted");
}

TEST(TaskFamily, JsonCarriesTheFamilyAndGaussianTasksKeepTheirBytes) {
  const TaskConfig plain = Task(4, 6, "gaussian");
  EXPECT_EQ(plain.ToJson().find("family"), std::string::npos);
  for (const std::string spec : {"pool:16:3", "noise-mix:0.1,1:0.3,0.7", "sparse:2"}) {
    const TaskConfig t = Task(4, 6, spec);
    const TaskConfig back = TaskConfig::FromJson(t.ToJson(), "test");
    EXPECT_EQ(back, t) << spec;
    EXPECT_NE(back, plain) << spec;
  }
  EXPECT_NE(Task(4, 6, "pool:16:3"), Task(4, 6, "pool:16:4"));  // another pool
}

// A pool task's prompts draw only the pool's members, each the member the prompt records, and
// their x and noise are the Gaussian task's (the family draws from a generator of its own).
TEST(TaskFamily, PoolPromptsDrawOnlyPoolMembers) {
  const TaskConfig pool = Task(3, 5, "pool:3:9", /*noise=*/0.25);
  const PromptSet set = SamplePrompts(pool, /*seed=*/4, 0, 300);
  const arma::mat members = icl::data::PoolMembers(pool.family, 3, 3, pool.w_scale);
  ASSERT_EQ(set.draw.size(), 300u);
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < set.size(); ++i) {
    ASSERT_GE(set.draw[i], 0);
    ASSERT_LT(set.draw[i], 3);
    seen.insert(set.draw[i]);
    EXPECT_TRUE(
        arma::approx_equal(set.w.col(i), members.col(arma::uword(set.draw[i])), "absdiff", 0.0));
  }
  EXPECT_EQ(seen.size(), 3u);  // 300 uniform draws from 3 miss one with probability < 1e-50
  const PromptSet gauss = SamplePrompts(Task(3, 5, "gaussian", 0.25), 4, 0, 300);
  EXPECT_TRUE(arma::approx_equal(set.x, gauss.x, "absdiff", 0.0));
  EXPECT_TRUE(gauss.draw.empty());
  // Members come from the pool seed alone: another training seed, the same pool.
  const PromptSet other = SamplePrompts(pool, /*seed=*/5, 0, 50);
  for (std::size_t i = 0; i < other.size(); ++i)
    EXPECT_TRUE(arma::approx_equal(other.w.col(i), members.col(arma::uword(other.draw[i])),
                                   "absdiff", 0.0));
}

TEST(TaskFamily, SparsePromptsKeepSCoordinatesOfTheGaussianDraw) {
  const TaskConfig sparse = Task(8, 4, "sparse:2");
  const PromptSet set = SamplePrompts(sparse, 3, 0, 200);
  const PromptSet gauss = SamplePrompts(Task(8, 4, "gaussian"), 3, 0, 200);
  std::set<int> coordinates;
  for (std::size_t i = 0; i < set.size(); ++i) {
    int nonzero = 0;
    for (int r = 0; r < 8; ++r)
      if (set.w(r, i) != 0) {
        ++nonzero;
        coordinates.insert(r);
        EXPECT_EQ(set.w(r, i), gauss.w(r, i));
      }
    EXPECT_EQ(nonzero, 2);
    // The labels are those of the sparse w on the same x.
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int r = 0; r < 8; ++r)
        dot += set.w(r, i) * set.x(r, j, i);
      EXPECT_EQ(set.y(j, i), dot);
    }
  }
  EXPECT_EQ(coordinates.size(), 8u);  // every coordinate is used by some prompt
}

// The prompt's noise level is the one it records: with levels 0 and 1, the labels of a prompt
// that drew 0 are w.x exactly and those of a prompt that drew 1 are not.
TEST(TaskFamily, NoiseMixPromptsUseTheLevelTheyDrew) {
  const TaskConfig mix = Task(4, 6, "noise-mix:0,1:0.25,0.75");
  const PromptSet set = SamplePrompts(mix, 2, 0, 400);
  int quiet = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    double residual = 0;
    for (int j = 0; j < 6; ++j) {
      double dot = 0;
      for (int r = 0; r < 4; ++r)
        dot += set.w(r, i) * set.x(r, j, i);
      residual += std::abs(set.y(j, i) - dot);
    }
    if (set.draw[i] == 0) {
      ++quiet;
      EXPECT_EQ(residual, 0.0);
    } else {
      EXPECT_GT(residual, 0.0);
    }
  }
  // Binomial(400, 0.25): mean 100, sd 8.7; 60..140 is beyond 4.5 sd on either side.
  EXPECT_GT(quiet, 60);
  EXPECT_LT(quiet, 140);
}
