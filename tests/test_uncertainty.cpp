// Bootstrap intervals over test prompts: coverage of a planted R2, power and level of the
// paired difference. Data come from the project's portable generator, so every machine draws
// the same numbers and the counts below are fixed; the bounds are set from the nominal rates.
#include <gtest/gtest.h>

#include <cmath>

#include "data/task.hpp"
#include "probes/uncertainty.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

// n test prompts of y = w.x + e with x ~ N(0, I_3), |w|^2 = 0.5, e ~ N(0, 0.5): the population
// R2 of the true map is 0.5. Predictors: the true map plus independent noise of variance
// `extra_a` / `extra_b`, whose population R2 is 0.5 - extra.
struct Planted {
  arma::vec sse_a, sse_b, sst;
};
Planted Draw(int n, double extra_a, double extra_b, std::uint64_t seed) {
  data::Rng rng(seed, /*stream=*/7);
  const arma::vec w = {0.5, 0.5, 0.0};  // |w|^2 = 0.5
  arma::vec y(n), ya(n), yb(n);
  for (int i = 0; i < n; ++i) {
    double f = 0;
    for (int j = 0; j < 3; ++j)
      f += w(j) * rng.Normal();
    y(i) = f + std::sqrt(0.5) * rng.Normal();
    ya(i) = f + std::sqrt(extra_a) * rng.Normal();
    yb(i) = f + std::sqrt(extra_b) * rng.Normal();
  }
  Planted p;
  p.sse_a = arma::square(y - ya);
  p.sse_b = arma::square(y - yb);
  p.sst = arma::square(y - arma::mean(y));
  return p;
}

}  // namespace

TEST(Bootstrap, IntervalsCoverAPlantedR2AtTheirRate) {
  // A 95% interval should cover 0.5 in about 95 of 100 independent test sets; fewer than 90
  // happens with probability 2% for a correct 95% procedure (binomial), so the bound is the
  // nominal rate's, not a tuned one. Percentile intervals of a ratio at n = 400 run close to
  // nominal.
  int covered = 0;
  for (int rep = 0; rep < 100; ++rep) {
    const Planted p = Draw(400, 0.0, 0.0, 100 + rep);
    const probes::Bootstrap boot(400, 1, 1000, rep);
    const probes::Interval i = probes::PercentileInterval(boot.R2(0, p.sse_a, p.sst));
    ASSERT_LT(i.lo, i.hi);
    covered += i.Contains(0.5);
  }
  RecordProperty("covered_of_100", covered);
  EXPECT_GE(covered, 90);
  EXPECT_LE(covered, 100);
}

TEST(Bootstrap, PairedDifferenceFindsAPlantedGapAndKeepsItsLevel) {
  // Planted gap: R2 0.50 vs 0.45 on the same 1,000 prompts. The per-prompt difference of
  // squared errors has SD ~0.32, so the gap is ~5 standard errors: found in nearly every set.
  // Zero gap: two predictors of equal quality; a 95% interval excludes 0 in ~5 of 100 sets,
  // more than 10 with probability 1%.
  int found = 0, false_alarms = 0;
  for (int rep = 0; rep < 100; ++rep) {
    const probes::Bootstrap boot(1000, 1, 1000, 7 + rep);
    const Planted gap = Draw(1000, 0.0, 0.05, 300 + rep);
    const probes::Interval d =
        probes::PercentileInterval(boot.R2(0, gap.sse_a, gap.sst) - boot.R2(0, gap.sse_b, gap.sst));
    found += d.lo > 0;
    const Planted same = Draw(1000, 0.05, 0.05, 600 + rep);
    const probes::Interval z = probes::PercentileInterval(boot.R2(0, same.sse_a, same.sst) -
                                                          boot.R2(0, same.sse_b, same.sst));
    false_alarms += !z.Contains(0.0);
  }
  RecordProperty("found_of_100", found);
  RecordProperty("false_alarms_of_100", false_alarms);
  EXPECT_GE(found, 90);
  EXPECT_LE(false_alarms, 10);
}

TEST(Bootstrap, TwoStageOverSeedsWidensWithTheSpreadBetweenSeeds) {
  // Three seeds with identical test errors: the mean's interval is a single seed's (no spread
  // between seeds adds nothing). Shift one seed's errors: the interval must widen.
  const Planted p = Draw(300, 0.0, 0.3, 11);
  const probes::Bootstrap boot(300, 3, 1000, 5);
  const arma::mat same = arma::repmat(p.sse_a, 1, 3), sst = arma::repmat(p.sst, 1, 3);
  arma::mat mixed = same;
  mixed.col(2) = p.sse_b;
  const probes::Interval a = probes::PercentileInterval(boot.MeanR2(same, sst));
  const probes::Interval b = probes::PercentileInterval(boot.MeanR2(mixed, sst));
  EXPECT_GT(b.hi - b.lo, 1.2 * (a.hi - a.lo));
  // Every replicate of identical seeds is a single-seed replicate: centred on the same R2.
  const double r2 = 1.0 - arma::accu(p.sse_a) / arma::accu(p.sst);
  EXPECT_TRUE(a.Contains(r2));
  EXPECT_THROW(probes::Bootstrap(0, 1, 1000, 0), std::invalid_argument);
  // Errors of the wrong count are a caller's bug (the probes file reader checks their shapes).
  EXPECT_TRUE(test::ThrowsInternalError([&] { boot.R2(0, arma::vec(5), arma::vec(5)); }));
}

// The batched forms (J statistics per matrix product) draw the same resamples as the one-vector
// forms: column j agrees with the vector call on the j-th columns, to the rounding of a GEMM
// against a GEMV over n = 50 non-negative terms (well under 1e-12 relative).
TEST(Bootstrap, BatchedStatisticsAgreeWithOneAtATime) {
  const arma::uword n = 50, J = 3;
  const int S = 3;
  const probes::Bootstrap boot(n, S, 200, 9);
  arma::arma_rng::set_seed(3);
  std::vector<arma::mat> sse, sst, x;
  for (int s = 0; s < S; ++s) {
    sse.push_back(arma::randu(n, J));
    sst.push_back(sse.back() + arma::randu(n, J));
    x.push_back(arma::randn(n, J));
  }
  const arma::mat r2 = boot.MeanR2(sse, sst), mean = boot.MeanOverSeeds(x);
  for (arma::uword j = 0; j < J; ++j) {
    arma::mat e(n, S), t(n, S), v(n, S);
    for (int s = 0; s < S; ++s) {
      e.col(s) = sse[s].col(j);
      t.col(s) = sst[s].col(j);
      v.col(s) = x[s].col(j);
    }
    EXPECT_LE(arma::abs(r2.col(j) - boot.MeanR2(e, t)).max(), 1e-12);
    EXPECT_LE(arma::abs(mean.col(j) - boot.MeanOverSeeds(v)).max(), 1e-12);
  }
}
