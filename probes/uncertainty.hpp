// Intervals on probe scores: a seeded bootstrap over test prompts from the per-prompt squared
// errors a probing run keeps, hierarchical over seeds where there are several, and paired
// differences (model vs control, layer vs layer) on the same resamples.
#pragma once

#include <armadillo>
#include <cstdint>
#include <limits>
#include <vector>

namespace icl::probes {

struct Interval {
  double lo = std::numeric_limits<double>::quiet_NaN();
  double hi = std::numeric_limits<double>::quiet_NaN();
  bool Contains(double x) const { return lo <= x && x <= hi; }
};

inline constexpr int kDefaultReplicates = 1000;
inline constexpr double kConfidence = 0.95;

// The percentile interval of bootstrap replicates at `level`.
Interval PercentileInterval(const arma::vec& replicates, double level = kConfidence);

// Bootstrap resamples of the test prompts of `seeds` probe seeds (each seed has its own test
// split of n prompts, in split order). Replicate b of a per-seed score resamples that seed's
// prompts; replicate b of the mean over seeds first draws S seeds with replacement, then each
// drawn seed's prompts (a two-stage bootstrap: it carries the spread between seeds, from
// different splits and probe initialisations, as well as the test-set noise). Every score
// computed through one Bootstrap uses the same resamples, so differences are paired.
class Bootstrap {
 public:
  // shared_prompts: every seed is scored on the same n prompts (trace), so a replicate resamples
  // the prompts once and every seed drawn uses that resample (the prompts' difficulty, common
  // to the seeds, stays in the interval); otherwise each seed has its own prompts (probe's
  // test splits) and its own resample.
  Bootstrap(arma::uword n, int seeds, int replicates = kDefaultReplicates, std::uint64_t seed = 0,
            bool shared_prompts = false);
  int replicates() const { return replicates_; }
  arma::uword n() const { return n_; }
  int seeds() const { return seeds_; }

  // R2 = 1 - sum sse / sum sst on each resample of seed s's test prompts; sse and sst are the
  // per-prompt squared errors of the probe and of the test mean (n each).
  arma::vec R2(int s, const arma::vec& sse, const arma::vec& sst) const;
  // Replicates of the mean of x (n per-prompt values) over resamples of seed s's prompts.
  arma::vec Mean(int s, const arma::vec& x) const;
  // Replicates of the mean over seeds of the mean over prompts of x (n x S): the two-stage
  // resample of the mean over seeds.
  arma::vec MeanOverSeeds(const arma::mat& x) const;
  // Replicates of the mean over seeds of R2; sse and sst are n x S.
  arma::vec MeanR2(const arma::mat& sse, const arma::mat& sst) const;
  // The same for J statistics at once (one matrix product per seed instead of J): column j of
  // sse[s] and sst[s] (n x J, one pair per seed) is statistic j. Returns replicates x J, column
  // j equal to MeanR2 of the j-th columns (the same resamples).
  arma::mat MeanR2(const std::vector<arma::mat>& sse, const std::vector<arma::mat>& sst) const;
  // Likewise MeanOverSeeds for J statistics: x[s] is n x J.
  arma::mat MeanOverSeeds(const std::vector<arma::mat>& x) const;

 private:
  // The second stage: per (replicates x S) holds each seed's first-stage replicates.
  arma::vec DrawSeeds(const arma::mat& per) const;
  // The same per statistic: per[s] holds seed s's replicates (replicates x J).
  arma::mat DrawSeeds(const std::vector<arma::mat>& per) const;

  arma::uword n_;
  int seeds_, replicates_;
  bool shared_ = false;
  std::vector<arma::mat> counts_;  // per seed: replicates x n multinomial draw counts
  arma::umat draws_;               // replicates x S: the seeds drawn for the mean
};

}  // namespace icl::probes
