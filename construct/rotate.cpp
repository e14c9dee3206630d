// A random orthogonal change of basis of the residual stream, folded into a model's weights:
// constructions whose quantities do not sit on their own axes (issue 30).
#include <cmath>

#include "construct/construct.hpp"
#include "core/errors.hpp"

namespace icl::construct {

namespace {

constexpr std::uint64_t kRotationStream = 0x726f74617465ULL;  // "rotate"

torch::Tensor ToTensor(const arma::mat& m) {
  // Armadillo is column-major: m^T's memory is m row-major.
  const arma::mat t = m.t();
  return torch::from_blob(const_cast<double*>(t.memptr()), {long(m.n_rows), long(m.n_cols)},
                          torch::kFloat64)
      .clone();
}

// w <- left * w * right^T in float64, stored back in w's own type (float32).
void Fold(torch::Tensor w, const torch::Tensor* left, const torch::Tensor* right) {
  auto v = w.to(torch::kFloat64);
  const bool vector = v.dim() == 1;
  if (vector) v = v.unsqueeze(1);
  if (left) v = torch::matmul(*left, v);
  if (right) v = torch::matmul(v, right->t());
  if (vector) v = v.squeeze(1);
  w.copy_(v.to(w.dtype()));
}

}  // namespace

arma::mat RandomOrthogonal(int size, std::uint64_t seed) {
  data::Rng rng(seed, kRotationStream);
  arma::mat q(size, size);
  for (int j = 0; j < size; ++j)
    for (int i = 0; i < size; ++i)
      q(i, j) = rng.Normal();
  // Gram-Schmidt of a Gaussian matrix's columns is its QR with R's diagonal positive, the Haar
  // measure on O(size). Modified Gram-Schmidt, run twice ("twice is enough"), keeps Q orthogonal
  // to working precision; plain loops, so the bits do not depend on a BLAS.
  for (int j = 0; j < size; ++j)
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < j; ++i) {
        double dot = 0;
        for (int r = 0; r < size; ++r)
          dot += q(r, i) * q(r, j);
        for (int r = 0; r < size; ++r)
          q(r, j) -= dot * q(r, i);
      }
      double norm = 0;
      for (int r = 0; r < size; ++r)
        norm += q(r, j) * q(r, j);
      norm = std::sqrt(norm);
      for (int r = 0; r < size; ++r)
        q(r, j) /= norm;
    }
  return q;
}

arma::mat RotateResidualStream(learners::Transformer& model, std::uint64_t seed) {
  if (model->config.norm != "none")
    throw core::InputError("construct", "rotate",
                           "the model has LayerNorm (norm '" + model->config.norm +
                               "'), which does not commute with a rotation of the residual "
                               "stream; only models without it can be rotated");
  const arma::mat q = RandomOrthogonal(model->config.hidden, seed);
  const torch::Tensor Q = ToTensor(q);
  torch::NoGradGuard no_grad;
  // h' = Q h everywhere: what writes the stream is multiplied by Q on the left, what reads it
  // by Q^T on the right (W h = W Q^T h').
  Fold(model->input_proj->weight, &Q, nullptr);
  Fold(model->input_proj->bias, &Q, nullptr);
  Fold(model->pos_embed, nullptr, &Q);  // [T, H]: each row a state, p' = Q p
  for (auto& m : *model->blocks) {
    auto& b = *m->as<learners::Block>();
    Fold(b.attn->in_proj_weight, nullptr, &Q);
    Fold(b.attn->out_proj->weight, &Q, nullptr);
    Fold(b.attn->out_proj->bias, &Q, nullptr);
    Fold(b.fc1->weight, nullptr, &Q);
    Fold(b.fc2->weight, &Q, nullptr);
    Fold(b.fc2->bias, &Q, nullptr);
  }
  Fold(model->readout->weight, nullptr, &Q);
  return q;
}

}  // namespace icl::construct
