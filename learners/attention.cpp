// The fused causal attention of kernels 3 (attention.hpp): forward and backward loops over one
// prompt and head at a time, each written so that its innermost loop runs over contiguous
// floats with no reduction (the compiler vectorises it without reordering any sum).
#include "learners/attention.hpp"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "learners/fused_exp.hpp"

namespace icl::learners {

namespace {

// Where one prompt's head lives in the [B, T, 3H] in-projection and the [B, T, H] output.
struct HeadView {
  std::int64_t T, dh, row3;  // row3 = 3H, the stride between positions of qkv
  const float* q;            // q(t, j) = q[t * row3 + j]; k and v likewise
  const float* k;
  const float* v;
};

struct Shape {
  std::int64_t B, T, H, M, dh;
  std::int64_t Tp;  // T rounded up to whole blocks of kKeys
};

// Keys per block of scores: a block's kKeys sums run side by side (one vector register), each
// over j in ascending order.
constexpr std::int64_t kKeys = 8;

HeadView View(const float* qkv, std::int64_t b, std::int64_t m, const Shape& s) {
  const float* base = qkv + b * s.T * 3 * s.H + m * s.dh;
  return {s.T, s.dh, 3 * s.H, base, base + s.H, base + 2 * s.H};
}

// dst[j * Tp + u] = src(u, j), zero for u >= T: the rows' j-th elements side by side, so that
// a product over j is accumulated for kKeys positions u at once.
void Transpose(const float* src, std::int64_t row, std::int64_t T, std::int64_t Tp, std::int64_t dh,
               float* dst) {
  for (std::int64_t j = 0; j < dh; ++j)
    for (std::int64_t u = 0; u < Tp; ++u)
      dst[j * Tp + u] = u < T ? src[u * row + j] : 0.0f;
}

// e^z of a softmax term, z = s - max(s) <= 0: 0 below float's normal range, NaN for NaN (so that
// a NaN score makes its row NaN, as LibTorch's softmax does).
inline float SoftmaxExp(float z) {
  if (z != z) return std::numeric_limits<float>::quiet_NaN();
  return z < -87.0f ? 0.0f : ExpKernel(z);
}

// The loops below take the head width as a template argument DH (0: the runtime s.dh), so that
// for the usual widths their accumulators live in registers and the loops unroll.
template <int DH>
inline std::int64_t Width(const Shape& s) {
  return DH > 0 ? DH : s.dh;
}

// out[u] = sum_j a[j] bt[j * Tp + u] for u < n (whole blocks: up to kKeys - 1 more are computed
// and left beside), each sum in ascending j.
template <int DH>
inline __attribute__((always_inline)) void RowTimesTransposed(const Shape& s, const float* a,
                                                              const float* bt, std::int64_t n,
                                                              float* out) {
  const std::int64_t dh = Width<DH>(s);
  for (std::int64_t u0 = 0; u0 < n; u0 += kKeys) {
    float acc[kKeys] = {};
    for (std::int64_t j = 0; j < dh; ++j) {
      const float aj = a[j];
      const float* b = bt + j * s.Tp + u0;
      for (std::int64_t l = 0; l < kKeys; ++l)
        acc[l] += aj * b[l];
    }
    for (std::int64_t l = 0; l < kKeys; ++l)
      out[u0 + l] = acc[l];
  }
}

// out[j] = sum_i w[i] rows(first + i)[j] for i < count, in ascending i; rows(i) = base + i*stride
// (stride in floats, along positions).
template <int DH>
inline __attribute__((always_inline)) void WeightedRows(const Shape& s, const float* w,
                                                        std::int64_t w_stride, const float* base,
                                                        std::int64_t stride, std::int64_t count,
                                                        float* out) {
  const std::int64_t dh = Width<DH>(s);
  float acc[DH > 0 ? DH : 1] = {};
  float* a = DH > 0 ? acc : out;
  if (DH == 0)
    for (std::int64_t j = 0; j < dh; ++j)
      a[j] = 0.0f;
  for (std::int64_t i = 0; i < count; ++i) {
    const float wi = w[i * w_stride];
    const float* r = base + i * stride;
    for (std::int64_t j = 0; j < dh; ++j)
      a[j] += wi * r[j];
  }
  if (DH > 0)
    for (std::int64_t j = 0; j < dh; ++j)
      out[j] = acc[j];
}

// One head's forward pass: P's rows (into p_head [T, Tp], or into the scratch `row` when
// p_head is null) and out_t (into out, rows of H floats).
template <int DH>
inline __attribute__((always_inline)) void HeadForward(const Shape& s, const HeadView& h,
                                                       float scale, float* kt, float* p_head,
                                                       float* row, float* out) {
  Transpose(h.k, h.row3, s.T, s.Tp, s.dh, kt);
  for (std::int64_t t = 0; t < s.T; ++t) {
    const std::int64_t n = t + 1;
    float* p = p_head ? p_head + t * s.Tp : row;
    RowTimesTransposed<DH>(s, h.q + t * h.row3, kt, n, p);
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t u = 0; u < n; ++u) {
      p[u] *= scale;
      mx = p[u] > mx ? p[u] : mx;
    }
    // The exponentials in a loop of their own (it vectorises), then their sum in ascending u.
    for (std::int64_t u = 0; u < n; ++u)
      p[u] = SoftmaxExp(p[u] - mx);
    float sum = 0.0f;
    for (std::int64_t u = 0; u < n; ++u)
      sum += p[u];
    const float inv = 1.0f / sum;
    for (std::int64_t u = 0; u < n; ++u)
      p[u] *= inv;
    for (std::int64_t u = n; u < s.Tp; ++u)
      p[u] = 0.0f;
    WeightedRows<DH>(s, p, 1, h.v, h.row3, n, out + t * s.H);
  }
}

// One head's backward pass into its columns of dqkv (every position written), from its rows of
// dout (g) and P; ds [T, Tp] and vt [dh, Tp] are scratch.
template <int DH>
inline __attribute__((always_inline)) void HeadBackward(const Shape& s, const HeadView& h,
                                                        float scale, const float* p_head,
                                                        const float* g, float* dq, float* vt,
                                                        float* ds) {
  float* dk = dq + s.H;
  float* dv = dq + 2 * s.H;
  Transpose(h.v, h.row3, s.T, s.Tp, s.dh, vt);
  for (std::int64_t t = 0; t < s.T; ++t) {
    const std::int64_t n = t + 1;
    const float* p = p_head + t * s.Tp;
    float* dst = ds + t * s.Tp;
    RowTimesTransposed<DH>(s, g + t * s.H, vt, n, dst);  // dP_tu = g_t . v_u
    float r = 0.0f;
    for (std::int64_t u = 0; u < n; ++u)
      r += p[u] * dst[u];
    for (std::int64_t u = 0; u < n; ++u)
      dst[u] = p[u] * (dst[u] - r) * scale;
    for (std::int64_t u = n; u < s.Tp; ++u)
      dst[u] = 0.0f;
    WeightedRows<DH>(s, dst, 1, h.k, h.row3, n, dq + t * h.row3);  // dq_t = sum_u dS_tu k_u
  }
  for (std::int64_t u = 0; u < s.T; ++u) {
    // dk_u = sum_{t >= u} dS_tu q_t, dv_u = sum_{t >= u} P_tu g_t
    WeightedRows<DH>(s, ds + u * s.Tp + u, s.Tp, h.q + u * h.row3, h.row3, s.T - u,
                     dk + u * h.row3);
    WeightedRows<DH>(s, p_head + u * s.Tp + u, s.Tp, g + u * s.H, s.H, s.T - u, dv + u * h.row3);
  }
}

Shape Check(const torch::Tensor& qkv, int heads) {
  if (qkv.scalar_type() != torch::kFloat32 || !qkv.device().is_cpu() || qkv.dim() != 3 ||
      heads <= 0 || qkv.size(2) % (3L * heads) != 0)
    throw std::logic_error(
        "FusedCausalAttention: expects float32 CPU qkv [B, T, 3H], H % heads == 0");
  const std::int64_t H = qkv.size(2) / 3, T = qkv.size(1);
  return {qkv.size(0), T, H, heads, H / heads, (T + kKeys - 1) / kKeys * kKeys};
}

// The heads bm in [begin, end) (bm = b * M + m). Compiled for AVX-512, AVX2 and the baseline,
// chosen at load time; the arithmetic is the same IEEE operations in the same order in each
// (no FMA: attention.cpp is compiled with -ffp-contract=off), so are the bits.
__attribute__((target_clones("avx512f", "avx2", "default"))) void ForwardHeads(
    const float* qkv, const Shape& s, float* out, float* p_all, std::int64_t begin,
    std::int64_t end) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.dh)));
  std::vector<float> kt(static_cast<std::size_t>(s.dh * s.Tp)), row(static_cast<std::size_t>(s.Tp));
  for (std::int64_t bm = begin; bm < end; ++bm) {
    const std::int64_t b = bm / s.M, m = bm % s.M;
    const HeadView h = View(qkv, b, m, s);
    float* p_head = p_all ? p_all + bm * s.T * s.Tp : nullptr;
    float* o = out + b * s.T * s.H + m * s.dh;
    switch (s.dh) {
      case 8:
        HeadForward<8>(s, h, scale, kt.data(), p_head, row.data(), o);
        break;
      case 16:
        HeadForward<16>(s, h, scale, kt.data(), p_head, row.data(), o);
        break;
      case 32:
        HeadForward<32>(s, h, scale, kt.data(), p_head, row.data(), o);
        break;
      default:
        HeadForward<0>(s, h, scale, kt.data(), p_head, row.data(), o);
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void BackwardHeads(
    const float* qkv, const float* p_all, const float* dout, const Shape& s, float* dqkv,
    std::int64_t begin, std::int64_t end) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.dh)));
  std::vector<float> vt(static_cast<std::size_t>(s.dh * s.Tp)),
      ds(static_cast<std::size_t>(s.T * s.Tp));
  for (std::int64_t bm = begin; bm < end; ++bm) {
    const std::int64_t b = bm / s.M, m = bm % s.M;
    const HeadView h = View(qkv, b, m, s);
    const float* p_head = p_all + bm * s.T * s.Tp;
    const float* g = dout + b * s.T * s.H + m * s.dh;
    float* dq = dqkv + b * s.T * 3 * s.H + m * s.dh;
    switch (s.dh) {
      case 8:
        HeadBackward<8>(s, h, scale, p_head, g, dq, vt.data(), ds.data());
        break;
      case 16:
        HeadBackward<16>(s, h, scale, p_head, g, dq, vt.data(), ds.data());
        break;
      case 32:
        HeadBackward<32>(s, h, scale, p_head, g, dq, vt.data(), ds.data());
        break;
      default:
        HeadBackward<0>(s, h, scale, p_head, g, dq, vt.data(), ds.data());
    }
  }
}

// P is kept as [B, M, T, Tp] (rows padded to whole key blocks); the weights a caller sees are
// its first T columns.
void Forward(const float* qkv, const Shape& s, float* out, float* p_all) {
  at::parallel_for(0, s.B * s.M, 1, [&](std::int64_t begin, std::int64_t end) {
    ForwardHeads(qkv, s, out, p_all, begin, end);
  });
}

void Backward(const float* qkv, const float* p_all, const float* dout, const Shape& s,
              float* dqkv) {
  at::parallel_for(0, s.B * s.M, 1, [&](std::int64_t begin, std::int64_t end) {
    BackwardHeads(qkv, p_all, dout, s, dqkv, begin, end);
  });
}

struct FusedAttentionFunction : torch::autograd::Function<FusedAttentionFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& qkv, std::int64_t heads) {
    const torch::Tensor x = qkv.contiguous();
    const Shape s = Check(x, static_cast<int>(heads));
    torch::Tensor out = torch::empty({s.B, s.T, s.H}, x.options());
    torch::Tensor p = torch::empty({s.B, s.M, s.T, s.Tp}, x.options());
    Forward(x.data_ptr<float>(), s, out.data_ptr<float>(), p.data_ptr<float>());
    ctx->save_for_backward({x, p});
    ctx->saved_data["heads"] = heads;
    ctx->mark_non_differentiable({p});
    return {out, p};
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Shape s = Check(saved[0], static_cast<int>(ctx->saved_data["heads"].toInt()));
    const torch::Tensor g = grads[0].contiguous();
    torch::Tensor dqkv = torch::empty_like(saved[0]);
    Backward(saved[0].data_ptr<float>(), saved[1].data_ptr<float>(), g.data_ptr<float>(), s,
             dqkv.data_ptr<float>());
    return {dqkv, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor FusedCausalAttention(const torch::Tensor& qkv, int heads, torch::Tensor* weights) {
  if (torch::GradMode::is_enabled() && qkv.requires_grad()) {
    auto outs = FusedAttentionFunction::apply(qkv, static_cast<std::int64_t>(heads));
    if (weights) *weights = outs[1].slice(/*dim=*/3, 0, outs[1].size(2)).contiguous();
    return outs[0];
  }
  // Inference: P is kept only when asked for.
  const torch::Tensor x = qkv.contiguous();
  const Shape s = Check(x, heads);
  torch::Tensor out = torch::empty({s.B, s.T, s.H}, x.options()), p;
  if (weights) p = torch::empty({s.B, s.M, s.T, s.Tp}, x.options());
  Forward(x.data_ptr<float>(), s, out.data_ptr<float>(), weights ? p.data_ptr<float>() : nullptr);
  if (weights) *weights = p.slice(/*dim=*/3, 0, s.T).contiguous();
  return out;
}

}  // namespace icl::learners
