// Armadillo <-> LibTorch copies (arma_torch.hpp).
#include "learners/arma_torch.hpp"

#include <stdexcept>

namespace icl::learners {

torch::Tensor ToTensor(const arma::mat& m, torch::Dtype dtype) {
  // m's column-major memory is the row-major [cols, rows] tensor of m^T.
  return torch::from_blob(const_cast<double*>(m.memptr()),
                          {static_cast<long>(m.n_cols), static_cast<long>(m.n_rows)},
                          torch::kFloat64)
      .t()
      .to(dtype)
      .contiguous();
}

arma::mat ToArma(const torch::Tensor& t) {
  if (t.dim() != 2) throw std::invalid_argument("ToArma: expected a 2-D tensor");
  const torch::Tensor c = t.detach().to(torch::kFloat64).t().contiguous();  // [cols, rows]
  return arma::mat(c.data_ptr<double>(), t.size(0), t.size(1));
}

arma::mat StateAt(const torch::Tensor& state, int pos) {
  // state[:, pos, :] row-major [B, H] is the column-major H x B matrix.
  const torch::Tensor s = state.select(/*dim=*/1, pos).to(torch::kFloat64).contiguous();
  return arma::mat(s.data_ptr<double>(), s.size(1), s.size(0));
}

void SetStateAt(torch::Tensor& state, int pos, const arma::mat& m) {
  state.select(/*dim=*/1, pos).copy_(ToTensor(m.t(), state.scalar_type()));
}

}  // namespace icl::learners
