// Causal multi-head attention of every prompt and head in one pass (kernels 3): the products,
// the softmax and its backward without one dispatched operator per prompt and head.
#pragma once

#include <torch/torch.h>

namespace icl::learners {

// qkv: float32 [B, T, 3H], the in-projection's output (head m's query at columns m*dh..,
// key at H + m*dh.., value at 2H + m*dh.., dh = H / heads). Returns out [B, T, H] with head m at
// columns m*dh.., where for each prompt b, head m and position t
//   s_tu = (q_t . k_u) / sqrt(dh) for u <= t,   P_tu = e^(s_tu - max_u s) / sum_u e^(...),
//   out_t = sum_{u <= t} P_tu v_u
// (the causal softmax attention of CausalSelfAttention). When `weights` is not null it
// receives P [B, heads, T, T] (zero above the diagonal).
//
// The arithmetic is fixed: every sum runs over its index in ascending order, with IEEE float
// operations only (no FMA contraction) and FusedExp for e^z, so the bits do not depend on the
// CPU's vector width or on how prompts are split among threads. The backward pass
//   dP_tu = dout_t . v_u,  dS_tu = P_tu (dP_tu - sum_u' P_tu' dP_tu') / sqrt(dh),
//   dq_t = sum_u dS_tu k_u,  dk_u = sum_{t >= u} dS_tu q_t,  dv_u = sum_{t >= u} P_tu dout_t
// uses the P that the forward pass kept.
torch::Tensor FusedCausalAttention(const torch::Tensor& qkv, int heads,
                                   torch::Tensor* weights = nullptr);

}  // namespace icl::learners
