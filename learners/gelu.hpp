// The tanh-approximated GELU of the transformer's MLP, in two arithmetics: LibTorch's operator
// (kernels 1, every checkpoint written before kernels existed) and iclprobe's fused one
// (kernels 2), which evaluates the same function in one pass and keeps what the backward pass
// needs, instead of computing tanh again there.
#pragma once

#include <torch/torch.h>

namespace icl::learners {

// gelu(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Kernels 2 computes sigmoid(2u) = 1 / (1 + e^(-2u)) with its own exp (a degree-6 polynomial on
// [-ln2/2, ln2/2] and an exact power of two; relative error below 2e-7 in float32) and IEEE
// float operations only (compiled without FMA contraction, no library call), so its bits are
// the same on every CPU and for any thread count. The backward pass is
//   dgelu/dx = s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2),  s = sigmoid(2u),
// from the s the forward pass kept. Takes float32 of any shape; returns a tensor of its shape.
torch::Tensor FusedGelu(const torch::Tensor& x);

// The arithmetic that `kernels` names (ModelConfig::kernels): 1 LibTorch's, 2 and 3 FusedGelu.
torch::Tensor Gelu(const torch::Tensor& x, int kernels);

// float32 e^z for z in [-87, 87] (clamped outside; a NaN z gives 1), the exp of FusedGelu;
// exposed for its test.
float FusedExp(float z);

}  // namespace icl::learners
