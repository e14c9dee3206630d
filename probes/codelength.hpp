// Online (prequential) codelength of a probe's targets given a representation, after Voita &
// Titov (2020), "Information-theoretic probing with minimum description length", for the
// closed-form ridge probe read as Bayesian linear regression; every quantity comes from the
// streamed sufficient statistics of each block, so the code needs no pass beyond the probe's.
//
// The training rows, in prompt order, are cut into blocks at the fractions f_1 < ... < f_B = 1
// of their count. Block 0 is sent by the Gaussian N(ybar0_j, s0_j^2) of its own mean and
// variance per target entry j (as Voita & Titov send it by the uniform code). Block i >= 1 is
// sent with the predictive distribution of the Bayesian ridge fitted on blocks 0..i-1:
//   z = [1; (x - mu0) / sd0]  (block 0's feature mean and standard deviation, fixed for the
//   code), u = y - ybar0, u_j = Z beta_j + eps, eps ~ N(0, sigma_j^2 I),
//   beta_j | sigma_j^2 ~ N(0, sigma_j^2 / lambda I), sigma_j^2 ~ InvGamma(a0, a0 s0_j^2), a0 = 1
//   (two pseudo-rows at the reference variance). Given the prefix P (A = Z_P^T Z_P + lambda I,
//   m_j = A^-1 Z_P^T u_Pj, a = a0 + n_P / 2, b_j = a0 s0_j^2 + RSS_j / 2 with
//   RSS_j = |u_Pj - Z_P m_j|^2 + lambda |m_j|^2), the block's u_Bj is multivariate Student t
//   with 2a degrees of freedom, centre Z_B m_j and scale (b_j / a)(I + Z_B A^-1 Z_B^T),
// whose log-density needs only p x p quantities: det(I + Z_B A^-1 Z_B^T) = det(A + G_B) / det(A)
// and r^T (I + Z_B A^-1 Z_B^T)^-1 r = r^T r - r^T Z_B (A + G_B)^-1 Z_B^T r (Woodbury), with
// G_B = Z_B^T Z_B and r = u_B - Z_B m. With lambda fixed the blocks' codes sum, by the chain rule,
// to -log p(u_1..B | u_0) = -log p(u_all) + log p(u_0), the Bayesian code (the log marginal
// likelihood); by default lambda is chosen per block from the grid by the evidence of the prefix
// (noise variances integrated out, so that the choice cannot collapse onto an interpolating fit
// when the prefix has fewer rows than features), which keeps the code a valid prequential code.
// Tests may fix the noise variances too (a Gaussian predictive, the limit a -> infinity).
// The reference ("uniform-variance") code is the same online code with no features (z = [1]):
// every row of a block gets the same predictive distribution. Compression = its bits / the
// probe's; the difference of the two, like the gap between two representations, does not
// depend on the precision below.
//
// Bits of a continuous target: each entry is sent to the precision Delta_j = precision * s0_j,
// costing -log2(density) - log2(Delta_j). The density stands for the probability of the cell of
// width Delta_j to within (Delta_j / s)^2 / 8 nats per entry for a predictive scale s (Taylor
// bound of log f over the cell), so the predictive scale is floored at Delta_j (the floor is
// reached only by a representation that predicts the entry to within Delta_j).
#pragma once

#include <armadillo>
#include <cstdint>
#include <vector>

#include "probes/ridge.hpp"

namespace icl::probes {

// The default schedule: the paper's fractions of the training rows.
std::vector<double> DefaultCodelengthFractions();

// Rows that end each block for `rows` training rows: ends[i] = round(f_i * rows), the last
// equal to rows. Throws core::InputError (setting "codelength_blocks") when the fractions are not
// strictly increasing in (0, 1], do not end at 1, or leave a block without rows.
std::vector<std::int64_t> CodelengthBlockEnds(const std::vector<double>& fractions,
                                              std::int64_t rows);

struct CodelengthOptions {
  arma::vec lambdas = arma::logspace(-3, 5, 20);  // grid searched by the prefix's evidence
  double precision = 1e-3;                        // Delta_j / s0_j
  // Tests and the exact identity: a fixed penalty instead of the choice on each prefix, and
  // optionally known noise variances (in target units, one per entry; needs the fixed penalty).
  double fixed_lambda = -1;
  arma::vec fixed_noise_var;
};

struct Codelength {
  arma::vec block_bits;          // per block (block 0 the same in both codes)
  arma::vec uniform_block_bits;  // per block, the reference code (no features)
  arma::vec block_lambda;        // the penalty each block was coded with (block 0: NaN)
  double bits = 0, uniform_bits = 0;
  double Compression() const { return uniform_bits / bits; }
};

// The online code of the blocks, given each block's feature and target statistics (in order;
// block 0 needs at least 2 rows; the targets' statistics with their per-entry sums of squares).
Codelength RidgeCodelength(const std::vector<FeatureStats>& features,
                           const std::vector<TargetStats>& targets,
                           const CodelengthOptions& options = {});

}  // namespace icl::probes
