// A random orthogonal change of basis of the residual stream, folded into a model's weights:
// constructions whose quantities do not sit on their own axes.
#include <cmath>

#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "learners/arma_torch.hpp"

namespace icl::construct {

namespace {

constexpr std::uint64_t kRotationStream = 0x726f74617465ULL;  // "rotate"

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
  return data::RandomOrthonormal(size, size, seed, kRotationStream);
}

arma::mat RotateResidualStream(learners::Transformer& model, std::uint64_t seed) {
  if (model->config.norm != "none")
    throw core::InputError("construct", "rotate",
                           "the model has LayerNorm (norm '" + model->config.norm +
                               "'), which does not commute with a rotation of the residual "
                               "stream; only models without it can be rotated");
  const arma::mat q = RandomOrthogonal(model->config.hidden, seed);
  const torch::Tensor Q = learners::ToTensor(q, torch::kFloat64);
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
