// What the files of distributed alignment search share (das.cpp: the request and the run;
// das_interchange.cpp: the pairs' states, the interchange and the subspace's training;
// das_file.cpp: the DAS file). Internal to intervene/.
#pragma once

#include <armadillo>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data/task.hpp"
#include "intervene/das.hpp"
#include "learners/transformer.hpp"
#include "probes/uncertainty.hpp"

namespace icl::intervene {

// An algorithm that is a function of X'X and X'y (the xty counterfactual).
struct MomentAlgorithm {
  enum Kind { kOls, kRidge, kGd } kind = kOls;
  double value = 0;  // lambda or alpha
  int steps = 1;
};
// ols, ridge:LAMBDA, bayes or gd:ALPHA[:STEPS]; throws core::InputError (setting "algorithm").
MomentAlgorithm ParseMomentAlgorithm(const std::string& spec, const data::TaskConfig& task);

// The states of one layer for a set of pairs: A's and B's, [P, 2n, H].
struct PairStates {
  torch::Tensor a, b;
  // At the query position: A's states layer..L-1 (shared between layers, not copies), so that
  // only the query's row runs on after the interchange (TransformerImpl::QueriesFrom).
  std::vector<torch::Tensor> context;
};

// Per requested layer, the states of `count` pairs of the stream `seed`, in batches.
std::vector<PairStates> CollectStates(learners::Transformer& model, const DasResult& res,
                                      std::uint64_t seed, int count, data::PromptSet& a_all,
                                      data::PromptSet& b_all);

// How the interchange is made: along a subspace (H x m, orthonormal columns), of the whole state
// at the positions, or not at all.
struct Interchange {
  enum Kind { kSubspace, kFull, kNone, kLinear } kind = kSubspace;
  torch::Tensor basis;  // kSubspace: H x m; kLinear: any H x H map Pr, h_A + Pr (h_B - h_A)
};

// The outputs of every pair at every k (P x K, float64), without gradients.
arma::mat AllOutputs(learners::Transformer& model, int layer, const PairStates& s,
                     const std::vector<int>& ks, DasPosition position, const Interchange& how,
                     int batch);

struct Iia {
  double value = 0, lo = 0, hi = 0;
};

// IIA per k (1 - sum (o - t)^2 / sum (t - mean t)^2 over pairs) and pooled over k, with bootstrap
// intervals over pairs for the pooled one (das.hpp).
Iia PooledIia(const arma::mat& o, const arma::mat& t, const probes::Bootstrap& boot,
              arma::vec* per_k);

// A ridge probe of the quantity from the states at the interchanged positions (the last one
// of each k's set), pooled over k with each k centred: an orthonormal basis of its directions
// (H x d) and its R2 on the pairs it was fitted on.
std::pair<arma::mat, double> ProbeDirections(const DasResult& res, const PairStates& s,
                                             const data::PromptSet& a);

// An orthonormal basis (H x D) of the span of the differences h_B - h_A at the interchanged
// positions over the training pairs and k: directions where every pair agrees (a construction's
// position and count rows, rows zero at those positions) are no-ops for any interchange, so
// DAS cannot place its subspace there or away from them; it searches within this span. The
// rank counts eigenvalues of the differences' second moment above 1e-10 of the largest (float32
// states that differ do so by far more; rows equal in A and B differ by exactly 0).
arma::mat DifferenceSupport(const DasResult& res, int layer, const PairStates& s);

// Learns the m-dimensional subspace of one layer: R = exp(S - S') R0 (orthogonal for every S; R0
// the start, DasStart), the subspace V R's first m columns (V the differences' support); Adam on
// S, each batch one k, to the mean of sqrt(1 + (o - t)^2 / var_k t) - 1: zero at a perfect
// interchange, quadratic near it, and with a bounded gradient where a subspace mixes large
// quantities into rows a later product reads (an MSE there is dominated by a few exploding
// pairs, and the steps follow them off the solution).
// After every epoch the IIA on held-out pairs (the test pairs at k = ks[p mod K]); an epoch that
// gains less than the tolerance halves the learning rate from the best subspace so far, and
// after kHalvings such epochs the training stops. Returns the best basis and the epochs run.
std::pair<arma::mat, int> TrainSubspace(learners::Transformer& model, const DasResult& res,
                                        std::size_t li, int m, const arma::mat& support,
                                        const arma::mat& probe, const PairStates& train,
                                        const arma::mat& train_t, const PairStates& test,
                                        const arma::mat& test_t,
                                        const std::function<void(const std::string&)>& progress);

}  // namespace icl::intervene
