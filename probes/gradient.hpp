// Gradient-trained probes in the paper's form (docs/paper.md "Probing"): attention pooling over
// positions with a learned, input-independent score vector s (alpha = softmax(s)), a learned
// projection W_v, then FF = linear or a 2-layer GELU MLP (the tanh-approximated GELU, computed
// by learners::FusedGelu). With pooling off the probe reads the single state after k examples.
// Trained with Adam on standardised features and targets, with early stopping on the validation
// split.
#pragma once

#include <torch/torch.h>

#include <armadillo>
#include <vector>

#include "probes/codelength.hpp"
#include "probes/gradient_options.hpp"
#include "probes/ridge.hpp"

namespace icl::probes {

// An uninitialised float32 tensor in memory of its own, mapped with transparent huge pages
// requested (madvise) where the kernel offers them: for the large buffers written once and read
// many times (a layer's states, their standardised copies). Faulting in hundreds of MB page by
// page cost more than the probes' epochs (an MLP probe run of 9 layers on 4,000 prompts took
// 158,000 page faults, 4.3 s of CPU; 2 MiB pages: 25,000, 3.4 s). Falls back to torch::empty
// when the mapping fails.
torch::Tensor LargeEmpty(at::IntArrayRef sizes);

struct PooledProbeImpl : torch::nn::Module {
  PooledProbeImpl(int positions, int hidden, int outputs, const GradientProbeOptions& options);
  // x: [B, T, H] when pooled, [B, H] otherwise -> [B, m]
  torch::Tensor forward(const torch::Tensor& x);
  static constexpr double kScoreScale = 10.0;
  torch::Tensor Alpha(bool detach = true) const;  // softmax(10 s), [T]; empty when not pooled

  bool pooled, mlp;
  torch::Tensor scores;
  torch::nn::Linear proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(PooledProbe);

// Features are float32 [N, T, H] (pooled) or [N, H]; targets are m x N doubles (Armadillo,
// column = prompt). Index vectors pick the train / validation / test prompts.
struct GradientFit {
  Errors test;
  arma::vec alpha;  // learned pooling weights (pooled probes)
  int epochs = 0;
  arma::mat test_predictions;  // m x test rows, in target units
  arma::vec val_mse;           // m: each entry's mean squared error on the validation rows
};
GradientFit FitGradientProbe(const torch::Tensor& features, const arma::mat& targets,
                             const arma::uvec& train, const arma::uvec& val, const arma::uvec& test,
                             const GradientProbeOptions& options);
// Several probes of one shape and one seed (e.g. one per layer) on the same targets and split,
// trained together as one batched model: stacked weights, batched matrix products, one Adam
// step for all, early stopping per probe. Probe g's result is the one FitGradientProbe gives
// for features[g] alone (which runs this with one probe), to float32 rounding.
std::vector<GradientFit> FitGradientProbes(const std::vector<torch::Tensor>& features,
                                           const arma::mat& targets, const arma::uvec& train,
                                           const arma::uvec& val, const arma::uvec& test,
                                           const GradientProbeOptions& options);

// Online codelength of linear / MLP probes on the schedule of codelength.hpp (Voita & Titov's
// procedure): for each block i >= 1 the probes are fitted anew on blocks 0..i-1 of the training
// rows `train` (in order; early stopping on `val`; as many optimiser steps, and as much
// patience in steps, as a fit on all of `train` would get), and block i's targets are sent by the
// Gaussian N(prediction, s_j^2) per entry, s_j^2 the fitted probe's mean squared error of entry
// j on the validation rows (held out from the fit and never coded, so the code stays
// prequential), floored at Delta_j^2. Block 0 and the reference code are those of the ridge
// code (RidgeCodelength without features). `ends`: CodelengthBlockEnds of train.n_elem. One
// result per features[g]; block_lambda is NaN.
std::vector<Codelength> GradientCodelengths(const std::vector<torch::Tensor>& features,
                                            const arma::mat& targets, const arma::uvec& train,
                                            const arma::uvec& val,
                                            const std::vector<std::int64_t>& ends,
                                            const GradientProbeOptions& options,
                                            const CodelengthOptions& code = {});

}  // namespace icl::probes
