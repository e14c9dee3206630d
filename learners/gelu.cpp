// The fused tanh-GELU (kernels 2) and the choice between it and LibTorch's (kernels 1).
#include "learners/gelu.hpp"

#include "learners/fused_exp.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace icl::learners {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// s = sigmoid(2u) for one x. Where e^(-2u) exceeds e^87, s < 1.6e-38 is taken as 0, so that the
// backward term x s (1 - s) u', which grows like |x|^3, stays 0 for very negative x. A NaN x
// gives s = 1/2, and y = x s and the gradient are NaN, as LibTorch's.
inline float Sigmoid2u(float x) {
  const float z = -2.0f * (kSqrt2OverPi * (x + kCubic * (x * x * x)));
  const float s = 1.0f / (1.0f + ExpKernel(z));
  return z > 87.0f ? 0.0f : s;
}

// The loops are compiled for AVX-512, AVX2 and the baseline, chosen at load time: the same IEEE
// operations in the same order in each (no FMA: -ffp-contract=off), so the same bits.
__attribute__((target_clones("avx512f", "avx2", "default"))) void Forward(const float* x, float* y,
                                                                          float* s,
                                                                          std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const float si = Sigmoid2u(x[i]);
    s[i] = si;
    y[i] = x[i] * si;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void ForwardOnly(const float* x,
                                                                              float* y,
                                                                              std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    y[i] = x[i] * Sigmoid2u(x[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void Backward(
    const float* g, const float* x, const float* s, float* dx, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const float xi = x[i], si = s[i];
    const float du = 2.0f * kSqrt2OverPi * (1.0f + 3.0f * kCubic * (xi * xi));
    // s (1 - s) is exactly 0 in both tails, where x^2 may overflow: 0, not 0 * inf.
    const float t = si * (1.0f - si);
    dx[i] = g[i] * (si + (t == 0.0f ? 0.0f : xi * t * du));
  }
}

void CheckFloat(const torch::Tensor& x) {
  if (x.scalar_type() != torch::kFloat32 || !x.device().is_cpu())
    throw std::logic_error("FusedGelu: expects a float32 CPU tensor");
}

struct FusedGeluFunction : torch::autograd::Function<FusedGeluFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    const torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc), s = torch::empty_like(xc);
    Forward(xc.data_ptr<float>(), y.data_ptr<float>(), s.data_ptr<float>(), xc.numel());
    ctx->save_for_backward({xc, s});
    return y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor g = grads[0].contiguous();
    torch::Tensor dx = torch::empty_like(saved[0]);
    Backward(g.data_ptr<float>(), saved[0].data_ptr<float>(), saved[1].data_ptr<float>(),
             dx.data_ptr<float>(), dx.numel());
    return {dx};
  }
};

}  // namespace

float FusedExp(float z) {
  return ExpKernel(z);
}

torch::Tensor FusedGelu(const torch::Tensor& x) {
  CheckFloat(x);
  if (torch::GradMode::is_enabled() && x.requires_grad()) return FusedGeluFunction::apply(x);
  // Inference (extraction, evaluation): nothing to keep for a backward pass.
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  ForwardOnly(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
  return y;
}

torch::Tensor Gelu(const torch::Tensor& x, int kernels) {
  if (kernels == 1) return torch::gelu(x, /*approximate=*/"tanh");
  if (kernels == 2 || kernels == 3) return FusedGelu(x);
  throw std::logic_error("Gelu: unknown kernels " + std::to_string(kernels));
}

}  // namespace icl::learners
