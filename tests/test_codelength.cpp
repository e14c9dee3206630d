// Codelength (online MDL) of ridge probes: the exact Bayesian Gaussian code by an independent
// dense path, the planted information a random representation lacks, and the schedule's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/errors.hpp"
#include "probes/codelength.hpp"
#include "probes/gradient.hpp"

using namespace icl::probes;

namespace {

constexpr double kLog2Pi = 1.8378770664093453;

// Gaussian draws from a fixed seed (the same on every machine with this standard library).
arma::mat Normal(arma::uword rows, arma::uword cols, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0.0, 1.0);
  arma::mat a(rows, cols);
  for (auto& v : a)
    v = g(rng);
  return a;
}

// The online code of the columns of (x, y) cut into blocks at `ends`.
Codelength Code(const arma::mat& x, const arma::mat& y, const std::vector<std::int64_t>& ends,
                const CodelengthOptions& options = {}) {
  std::vector<FeatureStats> f(ends.size());
  std::vector<TargetStats> t(ends.size());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < ends.size(); ++i) {
    f[i].Init(x.n_rows);
    f[i].Add(x.cols(start, ends[i] - 1));
    t[i].Init(x.n_rows, y.n_rows);
    t[i].Add(x.cols(start, ends[i] - 1), y.cols(start, ends[i] - 1));
    start = ends[i];
  }
  return RidgeCodelength(f, t, options);
}

// -log N(u; 0, noise (I + Z Z^T / lambda)) in nats, by a dense Cholesky of the n x n covariance:
// the marginal likelihood of the first `rows` rows, computed without the p x p identities.
double DenseNegLogMarginal(const arma::mat& z, const arma::vec& u, double lambda, double noise,
                           arma::uword rows) {
  const arma::mat zr = z.cols(0, rows - 1);
  arma::mat c = noise * (arma::eye(rows, rows) + zr.t() * zr / lambda);
  const arma::mat r = arma::chol(c, "lower");
  const arma::vec a = arma::solve(arma::trimatl(r), u.head(rows));
  return 0.5 * rows * kLog2Pi + arma::accu(arma::log(r.diag())) + 0.5 * arma::dot(a, a);
}

// -log of the multivariate Student t marginal of the first `rows` rows under the prior
// sigma^2 ~ InvGamma(a0, b0), beta | sigma^2 ~ N(0, sigma^2 / lambda I): 2 a0 degrees of freedom,
// scale (b0 / a0)(I + Z Z^T / lambda), by a dense Cholesky.
double DenseNegLogStudent(const arma::mat& z, const arma::vec& u, double lambda, double a0,
                          double b0, arma::uword rows) {
  const arma::mat zr = z.cols(0, rows - 1);
  const arma::mat c = arma::eye(rows, rows) + zr.t() * zr / lambda;
  const arma::mat r = arma::chol(c, "lower");
  const arma::vec a = arma::solve(arma::trimatl(r), u.head(rows));
  const double n = double(rows);
  return std::lgamma(a0) - std::lgamma(a0 + n / 2) + 0.5 * n * (kLog2Pi + std::log(b0)) +
         arma::accu(arma::log(r.diag())) + (a0 + n / 2) * std::log1p(arma::dot(a, a) / (2 * b0));
}

// The code's coordinates from block 0's rows: z = [1; (x - mu0) / sd0], and block 0's target
// mean and variance.
struct Coordinates {
  arma::mat z;
  arma::vec ybar, s0sq;
};
Coordinates CodeCoordinates(const arma::mat& x, const arma::mat& y, arma::uword n0) {
  Coordinates c;
  const arma::vec mu = arma::mean(x.cols(0, n0 - 1), 1);
  const arma::vec sd = arma::stddev(x.cols(0, n0 - 1), /*norm_type=*/1, /*dim=*/1);
  c.z.ones(x.n_rows + 1, x.n_cols);
  c.z.rows(1, x.n_rows) = (x.each_col() - mu).each_col() / sd;
  c.ybar = arma::mean(y.cols(0, n0 - 1), 1);
  c.s0sq = arma::var(y.cols(0, n0 - 1), /*norm_type=*/1, /*dim=*/1);
  return c;
}

// Features off centre and of other scales (the code standardises them) and targets with an
// offset: y = W^T x + noise, noise variances per entry.
void PlantedData(arma::mat& x, arma::mat& y, const arma::vec& noise, std::mt19937_64& rng) {
  const arma::uword p = 5, n = 300;
  x = Normal(p, n, rng);
  x.each_col() += arma::vec{1.0, -2.0, 0.5, 0.0, 3.0};
  x.each_col() %= arma::vec{1.0, 0.5, 2.0, 1.0, 3.0};
  const arma::mat w = Normal(p, noise.n_elem, rng);
  y = w.t() * x + arma::diagmat(arma::sqrt(noise)) * Normal(noise.n_elem, n, rng);
  y.each_col() += arma::linspace(0.5, -1.0, noise.n_elem);
}

// y = w^T x + eps (variance sigma2) with |w|^2 = p, and features independent of y, drawn in
// that order from one seed.
struct PlantedLinear {
  arma::vec w;
  arma::mat x, y, random;
};
PlantedLinear PlantLinear(arma::uword p, arma::uword n, double sigma2, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  PlantedLinear d;
  d.w = Normal(p, 1, rng);
  d.w *= std::sqrt(double(p)) / arma::norm(d.w);
  d.x = Normal(p, n, rng);
  d.y = d.w.t() * d.x + std::sqrt(sigma2) * Normal(1, n, rng);
  d.random = Normal(p, n, rng);
  return d;
}

// The realised information of rows [from, to): the log-likelihood ratio of the true conditional
// N(w^T x, sigma^2) over the true marginal N(0, |w|^2 + sigma^2), in bits.
double InformationBits(const arma::vec& w, double sigma2, const arma::mat& x, const arma::mat& y,
                       arma::uword from, arma::uword to) {
  const double vy = arma::dot(w, w) + sigma2;
  double llr = 0;
  for (arma::uword i = from; i < to; ++i) {
    const double r = y(i) - arma::dot(w, x.col(i));
    llr += (0.5 * std::log(vy / sigma2) + y(i) * y(i) / (2 * vy) - r * r / (2 * sigma2));
  }
  return llr / std::log(2.0);
}

}  // namespace

TEST(Codelength, EveryBlockIsTheBayesianStudentMarginalWithAFixedPenalty) {
  std::mt19937_64 rng(5);
  arma::mat x, y;
  PlantedData(x, y, {0.3, 0.7}, rng);
  const auto ends = CodelengthBlockEnds({0.02, 0.05, 0.1, 0.25, 0.5, 1.0}, x.n_cols);
  CodelengthOptions o;
  o.fixed_lambda = 2.0;
  const Codelength code = Code(x, y, ends, o);
  const Coordinates c = CodeCoordinates(x, y, ends[0]);
  const double log2_cells = arma::accu(arma::log2(o.precision * arma::sqrt(c.s0sq)));
  // Tolerance as in the Gaussian case below (the same dense Cholesky; lgamma is exact to a few
  // ulp of values below 1e3).
  std::int64_t start = ends[0];
  for (std::size_t i = 1; i < ends.size(); ++i) {
    double nats = 0;
    for (arma::uword j = 0; j < y.n_rows; ++j) {
      const arma::vec u = (y.row(j) - c.ybar(j)).t();
      // The prior of the code: a0 = 1, b0 = a0 s0_j^2.
      nats += DenseNegLogStudent(c.z, u, o.fixed_lambda, 1.0, c.s0sq(j), ends[i]) -
              DenseNegLogStudent(c.z, u, o.fixed_lambda, 1.0, c.s0sq(j), start);
    }
    EXPECT_NEAR(code.block_bits(i), nats / std::log(2.0) - double(ends[i] - start) * log2_cells,
                1e-5)
        << "block " << i;
    start = ends[i];
  }
}

TEST(Codelength, EveryBlockIsTheGaussianMarginalWithKnownNoise) {
  std::mt19937_64 rng(7);
  const arma::vec noise = {0.3, 0.7};
  arma::mat x, y;
  PlantedData(x, y, noise, rng);
  const arma::uword m = y.n_rows;
  const auto ends = CodelengthBlockEnds({0.02, 0.05, 0.1, 0.25, 0.5, 1.0}, x.n_cols);
  CodelengthOptions o;
  o.fixed_lambda = 2.0;
  o.fixed_noise_var = noise;
  o.precision = 1e-3;
  const Codelength code = Code(x, y, ends, o);

  // The independent path: the code's coordinates from block 0's rows, then dense likelihoods.
  const arma::uword n0 = ends[0];
  const Coordinates c = CodeCoordinates(x, y, n0);
  const arma::mat& z = c.z;
  const arma::vec &ybar = c.ybar, &s0sq = c.s0sq;
  const double log2_cells = arma::accu(arma::log2(o.precision * arma::sqrt(s0sq)));
  // Tolerance: the dense path's Cholesky of an n x n matrix with condition number at most
  // 1 + max|z|^2 n / lambda (~ 1e4 here) loses about cond * n * eps relative of the ~ 1e3 nats
  // it computes: 1e4 * 300 * 2.2e-16 * 1e3 = 7e-7 nats; 1e-5 bits covers it.
  std::int64_t start = n0;
  for (std::size_t i = 1; i < ends.size(); ++i) {
    double nats = 0;
    for (arma::uword j = 0; j < m; ++j) {
      const arma::vec u = (y.row(j) - ybar(j)).t();
      nats += DenseNegLogMarginal(z, u, o.fixed_lambda, noise(j), ends[i]) -
              DenseNegLogMarginal(z, u, o.fixed_lambda, noise(j), start);
    }
    const double bits = nats / std::log(2.0) - double(ends[i] - start) * log2_cells;
    EXPECT_NEAR(code.block_bits(i), bits, 1e-5) << "block " << i;
    EXPECT_EQ(code.block_lambda(i), o.fixed_lambda);
    start = ends[i];
  }
  // Block 0 and the reference code: N(ybar0_j, s0_j^2) per entry, to the same precision.
  double ref0 = 0;
  for (arma::uword j = 0; j < m; ++j) {
    const arma::rowvec e = y.row(j).head(n0) - ybar(j);
    ref0 += 0.5 * n0 * (kLog2Pi + std::log(s0sq(j))) + arma::dot(e, e) / (2 * s0sq(j));
  }
  EXPECT_NEAR(code.block_bits(0), ref0 / std::log(2.0) - double(n0) * log2_cells, 1e-8);
  EXPECT_NEAR(code.bits, arma::accu(code.block_bits), 1e-9 * std::abs(code.bits));
}

TEST(Codelength, ARandomRepresentationCostsThePlantedInformation) {
  // y = w^T x + eps with sigma = 1/2 and |w|^2 = p: the true features x carry
  // I = 1/2 log2((|w|^2 + sigma^2) / sigma^2) bits per row about y, independent ones carry none.
  const arma::uword p = 8, n = 4000;
  const double sigma2 = 0.25;
  const PlantedLinear planted = PlantLinear(p, n, sigma2, 11);
  const arma::vec& w = planted.w;
  const arma::mat &x = planted.x, &y = planted.y, &random = planted.random;
  const auto ends = CodelengthBlockEnds(DefaultCodelengthFractions(), n);
  const Codelength truth = Code(x, y, ends);
  const Codelength noise = Code(random, y, ends);
  const double llr = InformationBits(w, sigma2, x, y, ends[0], n);  // the coded rows (blocks 1..)
  ASSERT_GT(llr, 9000);                                             // about (n - 4) * 2.5 bits
  // A Bayes code exceeds the code of the best-fitting parameters by its regret, (k / 2) log2 N
  // bits for k parameters plus a constant (Rissanen): k = p + 2 (weights, intercept, noise
  // variance) for the true and the random features, k = 2 for the reference code; a penalty
  // chosen on each prefix from G values costs at most log2 G more per block. Either code's regret
  // can be the larger, so the codes differ by the realised information to within the larger.
  const double G = CodelengthOptions().lambdas.n_elem;
  const double tol = 0.5 * (p + 2) * std::log2(double(n)) + double(ends.size() - 1) * std::log2(G);
  EXPECT_NEAR(noise.bits - truth.bits, llr, tol);
  // Against the code without features: the true features gain the information, random ones
  // nothing (both references are the same code of the same rows).
  EXPECT_EQ(noise.uniform_bits, truth.uniform_bits);
  EXPECT_NEAR(truth.uniform_bits - truth.bits, llr, tol);
  EXPECT_NEAR(noise.uniform_bits - noise.bits, 0.0, tol);
  EXPECT_GT(truth.Compression(), 1.0 + (llr - tol) / truth.uniform_bits);
}

TEST(Codelength, RefusesSchedulesWithEmptyOrUnorderedBlocks) {
  auto refused = [](const std::vector<double>& f, std::int64_t rows) {
    try {
      CodelengthBlockEnds(f, rows);
    } catch (const icl::core::InputError& e) {
      return e.field() == "codelength_blocks";
    }
    return false;
  };
  EXPECT_TRUE(refused({0.5, 0.25, 1.0}, 1000));      // not increasing
  EXPECT_TRUE(refused({0.5, 0.5, 1.0}, 1000));       // repeated
  EXPECT_TRUE(refused({0.25, 0.5}, 1000));           // does not end at 1
  EXPECT_TRUE(refused({0.001, 0.0015, 1.0}, 1000));  // the second block rounds to no rows
  EXPECT_TRUE(refused({0.001, 1.0}, 1000));          // a first block of one row
  EXPECT_TRUE(refused({1.0}, 1000));                 // nothing coded online
  EXPECT_TRUE(refused({0.0, 0.5, 1.0}, 1000));       // a fraction of 0
  const auto ends = CodelengthBlockEnds({0.01, 0.1, 1.0}, 1000);
  EXPECT_EQ(ends, (std::vector<std::int64_t>{10, 100, 1000}));
}

// Linear probes trained by Adam on each prefix (Voita & Titov's procedure) code the planted
// targets: the true features save the planted information to within the probe's plug-in
// losses, random ones save nothing, and on the true features the code agrees with the ridge
// code, an independent path, to within a few percent of the information.
TEST(Codelength, GradientProbesCodeThePlantedInformationAsTheRidgeCodeDoes) {
  const arma::uword p = 8, n = 3000, n_train = 2400;
  const double sigma2 = 0.25;
  const PlantedLinear planted = PlantLinear(p, n, sigma2, 13);
  const arma::vec& w = planted.w;
  const arma::mat &x = planted.x, &y = planted.y, &random = planted.random;
  const arma::uvec train = arma::regspace<arma::uvec>(0, n_train - 1);
  const arma::uvec val = arma::regspace<arma::uvec>(n_train, n - 1);
  const auto ends = CodelengthBlockEnds({0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0}, n_train);
  auto tensor = [](const arma::mat& m) {  // p x n column-major == row-major [n, p]
    const arma::fmat f = arma::conv_to<arma::fmat>::from(m);
    return torch::from_blob(const_cast<float*>(f.memptr()), {long(f.n_cols), long(f.n_rows)},
                            torch::kFloat32)
        .clone();
  };
  GradientProbeOptions o;
  o.mlp = false, o.pooled = false, o.lr = 1e-2, o.max_epochs = 60, o.patience = 6, o.seed = 3;
  const auto codes = GradientCodelengths({tensor(x), tensor(random)}, y, train, val, ends, o);
  ASSERT_EQ(codes.size(), 2u);
  const Codelength ridge = Code(x.cols(train), y.cols(train), ends);
  // Both codes share block 0 and the reference code (the ridge code without features).
  EXPECT_EQ(codes[0].uniform_bits, ridge.uniform_bits);
  EXPECT_EQ(codes[0].block_bits(0), ridge.block_bits(0));
  const double llr = InformationBits(w, sigma2, x, y, ends[0], n_train);
  ASSERT_GT(llr, 5000);
  const double gain = codes[0].uniform_bits - codes[0].bits;
  // A plug-in code pays for every block's fit from fewer rows (the first blocks are 24 rows for
  // 9 parameters): allow it 20% of the information, and no gain beyond the information but its
  // fluctuation over the coded rows (3 sd of a sum of chi-square(1)/2 terms: 3 sqrt(n / 2) nats).
  EXPECT_GT(gain, 0.8 * llr);
  EXPECT_LT(gain, llr + 3 * std::sqrt(n_train / 2.0) / std::log(2.0));
  EXPECT_NEAR(codes[0].bits, ridge.bits, 0.05 * llr);
  EXPECT_NEAR(codes[1].uniform_bits - codes[1].bits, 0.0, 0.05 * llr);
}
