// AdamW over one flat parameter buffer.
#include "learners/flat_adamw.hpp"

#include "core/errors.hpp"

#include <stdexcept>

namespace icl::learners {

FlatAdamW::FlatAdamW(torch::nn::Module& module, const AdamWSettings& s) {
  std::int64_t total = 0;
  for (const auto& p : module.named_parameters()) {
    slots_.push_back(
        {p.key(), total, p.value().numel(),
         std::vector<std::int64_t>(p.value().sizes().begin(), p.value().sizes().end())});
    total += p.value().numel();
  }
  flat_ = torch::empty({total}, torch::kFloat32);
  grad_ = torch::zeros({total}, torch::kFloat32);
  {
    torch::NoGradGuard no_grad;
    std::size_t i = 0;
    for (auto& p : module.named_parameters()) {
      const Slot& slot = slots_[i++];
      View(flat_, slot).copy_(p.value());
      // The parameter keeps its identity (autograd leaf, module registration) and now shares the
      // flat storage; autograd accumulates into a defined gradient in place, so into grad_.
      p.value().set_data(View(flat_, slot));
      p.value().mutable_grad() = View(grad_, slot);
    }
  }
  flat_.set_requires_grad(true);
  flat_.mutable_grad() = grad_;
  adam_ = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{flat_},
                                                torch::optim::AdamWOptions(s.lr)
                                                    .betas({s.beta1, s.beta2})
                                                    .eps(s.eps)
                                                    .weight_decay(s.weight_decay));
}

torch::Tensor FlatAdamW::View(const torch::Tensor& flat, const Slot& s) const {
  return flat.narrow(0, s.offset, s.numel).view(s.shape);
}

double FlatAdamW::ClipGradNorm(double max_norm) {
  return torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{flat_}, max_norm);
}

void FlatAdamW::Step(double lr) {
  for (auto& group : adam_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  adam_->step();
}

AdamMoments FlatAdamW::Moments() {
  AdamMoments m;
  auto& state = adam_->state();
  const auto it = state.find(c10::guts::to_string(flat_.unsafeGetTensorImpl()));
  if (it == state.end()) return m;
  auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
  m.step = st.step();
  for (const Slot& s : slots_) {
    m.exp_avg[s.name] = View(st.exp_avg(), s);
    m.exp_avg_sq[s.name] = View(st.exp_avg_sq(), s);
  }
  return m;
}

void FlatAdamW::Restore(const AdamMoments& m) {
  if (m.step == 0) return;
  auto st = std::make_unique<torch::optim::AdamWParamState>();
  st->step(m.step);
  auto a = torch::zeros_like(flat_), b = torch::zeros_like(flat_);
  for (const Slot& s : slots_) {
    const auto ia = m.exp_avg.find(s.name), ib = m.exp_avg_sq.find(s.name);
    if (ia == m.exp_avg.end() || ib == m.exp_avg_sq.end())
      throw core::InputError("optimizer state", "", "no moments for parameter '" + s.name + "'");
    View(a, s).copy_(ia->second);
    View(b, s).copy_(ib->second);
  }
  st->exp_avg(a);
  st->exp_avg_sq(b);
  adam_->state()[c10::guts::to_string(flat_.unsafeGetTensorImpl())] = std::move(st);
}

}  // namespace icl::learners
