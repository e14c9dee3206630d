// Online codelength of ridge probes from per-block sufficient statistics (see codelength.hpp).
#include "probes/codelength.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/errors.hpp"

namespace icl::probes {

namespace {

constexpr double kLog2Pi = 1.8378770664093453;  // log(2 pi)
constexpr double kA0 = 1.0;                     // shape of the noise variances' prior

void Fail(const std::string& text) {
  throw core::InputError("probe", "codelength_blocks", text);
}

// Block statistics in the code's coordinates: z = [1; (x - mu0) / sd0], u = y - ybar0.
struct Coded {
  double n = 0;
  arma::mat g;   // Z^T Z, (p+1) x (p+1)
  arma::mat b;   // Z^T U, (p+1) x m
  arma::vec uu;  // per entry: U_j^T U_j
  void operator+=(const Coded& o) {
    n += o.n;
    g += o.g;
    b += o.b;
    uu += o.uu;
  }
};

}  // namespace

std::vector<double> DefaultCodelengthFractions() {
  // Voita & Titov's timestamps: 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50, 100 %.
  return {0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0};
}

std::vector<std::int64_t> CodelengthBlockEnds(const std::vector<double>& fractions,
                                              std::int64_t rows) {
  if (fractions.size() < 2) Fail("at least two blocks are needed (the first and one coded)");
  double prev = 0;
  for (double f : fractions) {
    if (!(f > prev) || !(f <= 1))
      Fail(fmt::format("the fractions must increase strictly within (0, 1], got {} after {}", f,
                       prev));
    prev = f;
  }
  if (fractions.back() != 1.0) Fail("the last fraction must be 1 (every training row is coded)");
  std::vector<std::int64_t> ends;
  std::int64_t before = 0;
  for (double f : fractions) {
    const auto end = std::int64_t(std::llround(f * double(rows)));
    if (end <= before)
      Fail(
          fmt::format("the block that ends at fraction {} of {} training rows has no rows; use "
                      "fewer or larger blocks, or more prompts",
                      f, rows));
    ends.push_back(end);
    before = end;
  }
  if (ends.front() < 2)
    Fail(
        fmt::format("the first block has {} row(s) of {}; it needs at least 2 (its mean and "
                    "variance define the reference code)",
                    ends.front(), rows));
  return ends;
}

namespace {

// Block 0's summary: the coordinates' centre and scale, the targets' centre and variance.
struct Reference {
  arma::mat T;            // z = T [1; x], (p+1) x (p+1)
  arma::vec ybar;         // m
  arma::vec s0sq;         // m: block 0's variance of each entry
  arma::vec delta;        // m: the precision each entry is sent to
  double log2_cells = 0;  // sum over entries of log2(delta_j)
};

Reference FromFirstBlock(const FeatureStats& f, const TargetStats& t, double precision) {
  const arma::uword p = f.sx.n_elem, m = t.sy.n_elem;
  const double n0 = double(f.count);
  Reference ref;
  const arma::vec mu = f.sx / n0;
  arma::vec sd =
      arma::sqrt(arma::clamp(f.sxx.diag() / n0 - arma::square(mu), 0.0, arma::datum::inf));
  for (arma::uword i = 0; i < p; ++i)
    if (!(sd(i) > 1e-12 * std::max(1.0, std::abs(mu(i))))) sd(i) = 1;  // constant: leave as is
  ref.ybar = t.sy / n0;
  ref.s0sq = t.syy_entries / n0 - arma::square(ref.ybar);
  for (arma::uword j = 0; j < m; ++j)
    if (!(ref.s0sq(j) > 1e-300))
      throw core::InputError(
          "probe", "codelength_blocks",
          fmt::format("target entry {} is constant over the first block of the code ({} rows), "
                      "so its reference code is undefined; make the first block larger",
                      j, f.count));
  ref.delta = precision * arma::sqrt(ref.s0sq);
  ref.log2_cells = arma::accu(arma::log2(ref.delta));
  ref.T.zeros(p + 1, p + 1);
  ref.T(0, 0) = 1;
  if (p > 0) {  // p = 0: the code without features
    ref.T.submat(1, 0, p, 0) = -mu / sd;
    ref.T.submat(1, 1, p, p).diag() = 1 / sd;
  }
  return ref;
}

Coded ToCodeCoordinates(const FeatureStats& s, const TargetStats& t, const Reference& ref) {
  const arma::uword p = ref.T.n_rows - 1, m = ref.ybar.n_elem;
  if (t.count != s.count || t.syy_entries.n_elem != m || s.sx.n_elem != p)
    throw std::logic_error("codelength: block statistics of different rows or shapes");
  const double n = double(s.count);
  arma::mat graw(p + 1, p + 1);
  graw(0, 0) = n;
  arma::mat braw(p + 1, m);
  braw.row(0) = t.sy.t() - n * ref.ybar.t();
  if (p > 0) {
    graw.submat(1, 0, p, 0) = s.sx;
    graw.submat(0, 1, 0, p) = s.sx.t();
    graw.submat(1, 1, p, p) = s.sxx;
    braw.rows(1, p) = t.sxy - s.sx * ref.ybar.t();
  }
  Coded c;
  c.n = n;
  c.g = ref.T * graw * ref.T.t();
  c.g = 0.5 * (c.g + c.g.t());
  c.b = ref.T * braw;
  c.uu = t.syy_entries - 2 * ref.ybar % t.sy + n * arma::square(ref.ybar);
  return c;
}

// Block 0 by N(ybar0_j, s0_j^2) per entry.
double FirstBlockBits(const Coded& c, const Reference& ref) {
  const double nats =
      0.5 * c.n * (double(ref.s0sq.n_elem) * kLog2Pi + arma::accu(arma::log(ref.s0sq))) +
      0.5 * arma::accu(c.uu / ref.s0sq);
  return nats / std::log(2.0) - c.n * ref.log2_cells;
}

// Blocks 1.. by the Bayesian ridge on the blocks before each (codelength.hpp); bits per block
// (entry 0 left 0) and the penalty each was coded with.
void OnlineBits(const std::vector<Coded>& blocks, const Reference& ref,
                const CodelengthOptions& options, arma::vec& bits, arma::vec& lambdas) {
  const bool fixed = options.fixed_lambda >= 0, fixed_noise = !options.fixed_noise_var.is_empty();
  const arma::uword q = blocks[0].g.n_rows, m = ref.ybar.n_elem;
  const arma::vec floor = arma::square(ref.delta);
  const arma::vec b0 = kA0 * ref.s0sq;  // InvGamma(a0, a0 s0_j^2): 2 a0 pseudo-rows at s0_j^2
  bits.zeros(blocks.size());
  lambdas.zeros(blocks.size());
  lambdas(0) = arma::datum::nan;
  Coded prefix = blocks[0];
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    const Coded& blk = blocks[i];
    if (blk.n < 1) throw std::logic_error("codelength: an empty block");
    arma::vec s;
    arma::mat V;
    if (!arma::eig_sym(s, V, prefix.g))
      throw core::InputError("probe", "",
                             "the codelength's Gram matrix has no eigendecomposition "
                             "(non-finite states?)");
    s = arma::clamp(s, 0.0, arma::datum::inf);
    const arma::mat c = V.t() * prefix.b;  // q x m
    const arma::mat c2 = arma::square(c);
    // RSS_j(lambda) = u^T u - b^T A^-1 b = |u - Z m|^2 + lambda |m|^2 on the prefix.
    auto rss = [&](double lambda) {
      return arma::vec(arma::clamp(prefix.uu - c2.t() * (1 / (s + lambda)), 0.0, arma::datum::inf));
    };
    // The noise variances' posterior after the prefix: InvGamma(a, b0_j + RSS_j / 2).
    const double a = kA0 + prefix.n / 2;
    double lambda = options.fixed_lambda;
    if (!fixed) {
      // The evidence of the prefix, log p(u_P | lambda), noise variances integrated out.
      double best = -arma::datum::inf;
      for (double l : options.lambdas) {
        const double logdet = arma::accu(arma::log(s + l)) - double(q) * std::log(l);
        const double ev = double(m) * (std::lgamma(a) - std::lgamma(kA0)) +
                          arma::accu(kA0 * arma::log(b0) - a * arma::log(b0 + rss(l) / 2)) -
                          0.5 * double(m) * (prefix.n * kLog2Pi + logdet);
        if (ev > best) best = ev, lambda = l;
      }
    }
    lambdas(i) = lambda;
    // The posterior mean m = A^-1 Z_P^T U_P, then the block's joint predictive per entry.
    const arma::mat mean = V * (c.each_col() / (s + lambda));  // q x m
    arma::mat a_next = prefix.g + blk.g;
    a_next.diag() += lambda;
    a_next = 0.5 * (a_next + a_next.t());
    arma::mat chol;
    if (!arma::chol(chol, a_next))
      throw core::InputError("probe", "",
                             "the codelength's posterior precision is not positive "
                             "definite (non-finite states?)");
    // log det(I + Z_B A^-1 Z_B^T) = log det(A + G_B) - log det(A)
    const double logdet_ratio =
        2 * arma::accu(arma::log(chol.diag())) - arma::accu(arma::log(s + lambda));
    const arma::mat gm = blk.g * mean;
    const arma::mat half = arma::solve(arma::trimatl(chol.t()), arma::mat(blk.b - gm));
    const arma::vec b = b0 + rss(lambda) / 2;
    double nats = 0;
    for (arma::uword j = 0; j < m; ++j) {
      const double rr =
          blk.uu(j) - 2 * arma::dot(mean.col(j), blk.b.col(j)) + arma::dot(mean.col(j), gm.col(j));
      // r^T (I + Z_B A^-1 Z_B^T)^-1 r = r^T r - (Z_B^T r)^T (A + G_B)^-1 Z_B^T r
      const double quad = std::max(0.0, rr - arma::dot(half.col(j), half.col(j)));
      if (fixed_noise) {  // Gaussian with the given variance
        const double var = options.fixed_noise_var(j);
        nats += 0.5 * blk.n * (kLog2Pi + std::log(var)) + 0.5 * logdet_ratio + quad / (2 * var);
      } else {  // Student t: 2a degrees of freedom, scale (b_j / a)(I + Z_B A^-1 Z_B^T)
        const double bj = std::max(b(j), a * floor(j));
        nats += std::lgamma(a) - std::lgamma(a + blk.n / 2) +
                0.5 * blk.n * (kLog2Pi + std::log(bj)) + 0.5 * logdet_ratio +
                (a + blk.n / 2) * std::log1p(quad / (2 * bj));
      }
    }
    bits(i) = nats / std::log(2.0) - blk.n * ref.log2_cells;
    prefix += blk;
  }
}

}  // namespace

Codelength RidgeCodelength(const std::vector<FeatureStats>& features,
                           const std::vector<TargetStats>& targets,
                           const CodelengthOptions& options) {
  const bool fixed = options.fixed_lambda >= 0, fixed_noise = !options.fixed_noise_var.is_empty();
  if (features.size() < 2 || targets.size() != features.size())
    throw std::logic_error("codelength: fewer than two blocks, or unpaired statistics");
  if (!(options.precision > 0) || !std::isfinite(options.precision))
    throw std::logic_error("codelength: the precision must be positive");
  if (!fixed &&
      (options.lambdas.is_empty() || options.lambdas.min() <= 0 || !options.lambdas.is_finite()))
    throw std::logic_error("codelength: the evidence needs positive finite penalties");
  const arma::uword m = targets[0].sy.n_elem;
  if (features[0].count < 2) throw std::logic_error("codelength: the first block needs two rows");
  if (fixed_noise &&
      (!fixed || options.fixed_noise_var.n_elem != m || options.fixed_noise_var.min() <= 0))
    throw std::logic_error(
        "codelength: fixed noise variances need a fixed penalty and must be "
        "positive, one per entry");
  // Block 0 fixes the coordinates and the reference code.
  const Reference ref = FromFirstBlock(features[0], targets[0], options.precision);
  std::vector<Coded> blocks, intercept_only;
  for (std::size_t i = 0; i < features.size(); ++i) {
    blocks.push_back(ToCodeCoordinates(features[i], targets[i], ref));
    // The same code with no features: every row of a block the same predictive distribution.
    Coded c = blocks.back();
    c.g = c.g.submat(0, 0, 0, 0);
    c.b = c.b.row(0);
    intercept_only.push_back(std::move(c));
  }
  Codelength out;
  arma::vec unused;
  OnlineBits(blocks, ref, options, out.block_bits, out.block_lambda);
  OnlineBits(intercept_only, ref, options, out.uniform_block_bits, unused);
  out.block_bits(0) = out.uniform_block_bits(0) = FirstBlockBits(blocks[0], ref);
  out.bits = arma::accu(out.block_bits);
  out.uniform_bits = arma::accu(out.uniform_block_bits);
  if (!std::isfinite(out.bits) || !std::isfinite(out.uniform_bits))
    throw core::InputError("probe", "", "the codelength is not finite (non-finite states?)");
  return out;
}

}  // namespace icl::probes
