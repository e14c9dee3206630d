// Percentile bootstrap over test prompts, two-stage over seeds.
#include "probes/uncertainty.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "data/task.hpp"

namespace icl::probes {

Interval PercentileInterval(const arma::vec& replicates, double level) {
  Interval out;
  if (replicates.is_empty() || !replicates.is_finite()) return out;
  const arma::vec s = arma::sort(replicates);
  const double tail = (1.0 - level) / 2.0;
  // Linear interpolation between order statistics (type 7 quantiles).
  auto q = [&](double p) {
    const double h = p * double(s.n_elem - 1);
    const arma::uword lo = static_cast<arma::uword>(std::floor(h));
    const arma::uword hi = std::min<arma::uword>(lo + 1, s.n_elem - 1);
    return s(lo) + (h - double(lo)) * (s(hi) - s(lo));
  };
  out.lo = q(tail);
  out.hi = q(1.0 - tail);
  return out;
}

Bootstrap::Bootstrap(arma::uword n, int seeds, int replicates, std::uint64_t seed,
                     bool shared_prompts)
    : n_(n), seeds_(seeds), replicates_(replicates), shared_(shared_prompts) {
  if (n < 1 || seeds < 1 || replicates < 10)
    throw core::InputError("bootstrap", "", "needs test prompts, seeds and >= 10 replicates");
  for (int s = 0; s < seeds; ++s) {
    if (shared_prompts && s > 0) {  // one resample of the prompts for every seed
      counts_.push_back(counts_[0]);
      continue;
    }
    data::Rng rng(seed * 1000003ULL + static_cast<std::uint64_t>(s), /*stream=*/0xb0075);
    arma::mat c(replicates, n, arma::fill::zeros);
    for (int b = 0; b < replicates; ++b)
      for (arma::uword i = 0; i < n; ++i)
        c(b, rng.NextU64() % n) += 1.0;
    counts_.push_back(std::move(c));
  }
  data::Rng rng(seed, /*stream=*/0x5eed5);
  draws_.set_size(replicates, seeds);
  for (int b = 0; b < replicates; ++b)
    for (int j = 0; j < seeds; ++j)
      draws_(b, j) = rng.NextU64() % static_cast<std::uint64_t>(seeds);
}

arma::vec Bootstrap::R2(int s, const arma::vec& sse, const arma::vec& sst) const {
  if (sse.n_elem != n_ || sst.n_elem != n_)
    throw std::logic_error("bootstrap: expected " + std::to_string(n_) +
                           " per-prompt errors, got " + std::to_string(sse.n_elem));
  return 1.0 - (counts_.at(s) * sse) / (counts_.at(s) * sst);
}

arma::vec Bootstrap::Mean(int s, const arma::vec& x) const {
  if (x.n_elem != n_)
    throw std::logic_error("bootstrap: expected " + std::to_string(n_) +
                           " per-prompt values, got " + std::to_string(x.n_elem));
  return (counts_.at(s) * x) / double(n_);
}

arma::vec Bootstrap::MeanOverSeeds(const arma::mat& x) const {
  if (x.n_cols != arma::uword(seeds_))
    throw std::logic_error("bootstrap: expected values of " + std::to_string(seeds_) + " seeds");
  if (seeds_ == 1) return Mean(0, x.col(0));
  arma::mat per(replicates_, seeds_);
  for (int s = 0; s < seeds_; ++s)
    per.col(s) = Mean(s, x.col(s));
  return DrawSeeds(per);
}

arma::vec Bootstrap::MeanR2(const arma::mat& sse, const arma::mat& sst) const {
  if (sse.n_cols != arma::uword(seeds_) || sst.n_cols != arma::uword(seeds_))
    throw std::logic_error("bootstrap: expected errors of " + std::to_string(seeds_) + " seeds");
  if (seeds_ == 1) return R2(0, sse.col(0), sst.col(0));
  arma::mat per(replicates_, seeds_);
  for (int s = 0; s < seeds_; ++s)
    per.col(s) = R2(s, sse.col(s), sst.col(s));
  return DrawSeeds(per);
}

arma::mat Bootstrap::MeanR2(const std::vector<arma::mat>& sse,
                            const std::vector<arma::mat>& sst) const {
  if (sse.size() != std::size_t(seeds_) || sst.size() != std::size_t(seeds_))
    throw std::logic_error("bootstrap: expected errors of " + std::to_string(seeds_) + " seeds");
  std::vector<arma::mat> per;
  for (int s = 0; s < seeds_; ++s) {
    if (sse[s].n_rows != n_ || sst[s].n_rows != n_ || sse[s].n_cols != sse[0].n_cols ||
        sst[s].n_cols != sse[0].n_cols)
      throw std::logic_error("bootstrap: expected n x J per-prompt errors per seed");
    per.push_back(1.0 - (counts_[s] * sse[s]) / (counts_[s] * sst[s]));
  }
  return seeds_ == 1 ? per[0] : DrawSeeds(per);
}

arma::mat Bootstrap::MeanOverSeeds(const std::vector<arma::mat>& x) const {
  if (x.size() != std::size_t(seeds_))
    throw std::logic_error("bootstrap: expected values of " + std::to_string(seeds_) + " seeds");
  std::vector<arma::mat> per;
  for (int s = 0; s < seeds_; ++s) {
    if (x[s].n_rows != n_ || x[s].n_cols != x[0].n_cols)
      throw std::logic_error("bootstrap: expected n x J per-prompt values per seed");
    per.push_back((counts_[s] * x[s]) / double(n_));
  }
  return seeds_ == 1 ? per[0] : DrawSeeds(per);
}

arma::mat Bootstrap::DrawSeeds(const std::vector<arma::mat>& per) const {
  arma::mat out(replicates_, per[0].n_cols, arma::fill::zeros);
  for (int b = 0; b < replicates_; ++b)
    for (int j = 0; j < seeds_; ++j)
      out.row(b) += per[draws_(b, j)].row(shared_ ? b : (b + 7919 * j) % replicates_);
  return out / double(seeds_);
}

arma::vec Bootstrap::DrawSeeds(const arma::mat& per) const {
  // A seed drawn twice in one replicate takes two different prompt resamples of it.
  arma::vec out(replicates_, arma::fill::zeros);
  for (int b = 0; b < replicates_; ++b)
    for (int j = 0; j < seeds_; ++j)
      out(b) += per(shared_ ? b : (b + 7919 * j) % replicates_, draws_(b, j));
  return out / double(seeds_);
}

}  // namespace icl::probes
