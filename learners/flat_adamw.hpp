// AdamW over one flat buffer: every parameter of a module becomes a view into one
// float32 tensor, and every gradient a view into another, so that zeroing the gradients, the
// clipping norm and the AdamW update are a handful of large kernels instead of a few for each of
// the module's ~100 tensors. The update itself is LibTorch's AdamW, applied to the flat buffer:
// element by element it is the same arithmetic as on each tensor (tests/test_transformer.cpp).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace icl::learners {

// AdamW's state as /train_state stores it: the step count and the moments per named parameter.
struct AdamMoments {
  std::int64_t step = 0;  // 0: no step taken yet (no moments)
  std::map<std::string, torch::Tensor> exp_avg, exp_avg_sq;
};

struct AdamWSettings {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

class FlatAdamW {
 public:
  // Moves `module`'s parameter values into the flat buffer and rebinds each parameter (and its
  // gradient) as a view of it. The module must not be moved or re-registered afterwards.
  FlatAdamW(torch::nn::Module& module, const AdamWSettings& settings);
  void ZeroGrad() { grad_.zero_(); }
  // Scales the gradient to total L2 norm at most max_norm; returns the norm before.
  double ClipGradNorm(double max_norm);
  void Step(double lr);
  // Views of the moments per named parameter (step 0 and no moments before the first step).
  AdamMoments Moments();
  // Restores moments saved by Moments() (checkpoint resume); every parameter must be present.
  void Restore(const AdamMoments& moments);
  std::int64_t numel() const { return flat_.numel(); }
  // The buffers themselves: every parameter's values, every gradient.
  torch::Tensor& flat() { return flat_; }
  torch::Tensor& grad() { return grad_; }

 private:
  struct Slot {
    std::string name;
    std::int64_t offset, numel;
    std::vector<std::int64_t> shape;
  };
  torch::Tensor View(const torch::Tensor& flat, const Slot& s) const;
  std::vector<Slot> slots_;
  torch::Tensor flat_, grad_;
  std::unique_ptr<torch::optim::AdamW> adam_;
};

}  // namespace icl::learners
