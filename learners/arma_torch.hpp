// Copies between Armadillo matrices and LibTorch tensors, with the layout written down once: an
// r x c Armadillo matrix is column-major, a [r, c] tensor row-major, so the same memory read the
// other way is the transpose. Every function copies; none keeps a pointer into its argument.
#pragma once

#include <torch/torch.h>

#include <armadillo>

namespace icl::learners {

// The [rows, cols] tensor of m's values, in `dtype`.
torch::Tensor ToTensor(const arma::mat& m, torch::Dtype dtype = torch::kFloat32);
// The rows x cols matrix (float64) of a 2-D tensor's values, whatever its dtype and strides.
arma::mat ToArma(const torch::Tensor& t);
// The H x B matrix (float64) of state[:, pos, :], states [B, T, H] float32: one column per prompt.
arma::mat StateAt(const torch::Tensor& state, int pos);
// Writes the H x B matrix m into state[:, pos, :] (float32).
void SetStateAt(torch::Tensor& state, int pos, const arma::mat& m);

}  // namespace icl::learners
