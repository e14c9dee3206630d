// Transformer learner: causal attention, pre-LN blocks, embedding and readout.
#include "learners/transformer.hpp"

#include <cmath>
#include <stdexcept>
#include <tuple>

#include "learners/attention.hpp"
#include "learners/gelu.hpp"

namespace icl::learners {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int hidden_, int heads_, int kernels_)
    : hidden(hidden_), heads(heads_), kernels(kernels_) {
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3L * hidden, hidden}));
  in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3L * hidden}));
  out_proj = register_module("out_proj", torch::nn::Linear(hidden, hidden));
  torch::nn::init::xavier_uniform_(in_proj_weight);
  torch::nn::init::zeros_(out_proj->bias);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, torch::Tensor* weights,
                                               const torch::Tensor* blocked) {
  // The fused kernel computes the causal mask only. With another mask (a bottleneck learner's)
  // the attention is LibTorch's operators at any `kernels`, the unfused path of kernels 1 and 2:
  // the scores [B, M, T, T] and the weights are materialised and each product is a dispatched
  // batched matmul, which the fused kernel avoids (its cost is not measured here).
  if (kernels >= 3 && !blocked)
    return out_proj(
        FusedCausalAttention(torch::linear(x, in_proj_weight, in_proj_bias), heads, weights));
  const auto B = x.size(0), T = x.size(1);
  const int64_t head_dim = hidden / heads;
  // [B, T, 3H] -> [3, B, M, T, head_dim]
  const auto qkv = torch::linear(x, in_proj_weight, in_proj_bias)
                       .view({B, T, 3, heads, head_dim})
                       .permute({2, 0, 3, 1, 4});
  const auto q = qkv[0], k = qkv[1], v = qkv[2];
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim)));
  // Causal: position t attends to positions <= t.
  const auto mask = blocked ? *blocked : torch::ones({T, T}, torch::kBool).triu(/*diagonal=*/1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  const auto attn = torch::softmax(scores, /*dim=*/-1);
  if (weights) *weights = attn;
  const auto out = torch::matmul(attn, v).transpose(1, 2).reshape({B, T, hidden});
  return out_proj(out);
}

namespace {

// Query rows' attention (before the output projection): per head, their open context keys
// (query_blocked [Q, T]) and then themselves, in one softmax. qq, kq, vq [B, M, Q, hd]; the
// context's k, v [B, M, T, hd] -> [B, Q, hidden].
torch::Tensor QueryAttention(const torch::Tensor& qq, const torch::Tensor& kq,
                             const torch::Tensor& vq, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& query_blocked,
                             double scale, std::int64_t hidden) {
  const auto B = qq.size(0), Q = qq.size(2), T = k.size(2);
  const auto to_context = (torch::matmul(qq, k.transpose(-2, -1)) * scale)
                              .masked_fill(query_blocked, -std::numeric_limits<float>::infinity());
  const auto to_self = (qq * kq).sum(-1, /*keepdim=*/true) * scale;  // [B, M, Q, 1]
  const auto attn = torch::softmax(torch::cat({to_context, to_self}, -1), -1);
  return (torch::matmul(attn.slice(-1, 0, T), v) + attn.slice(-1, T, T + 1) * vq)
      .transpose(1, 2)
      .reshape({B, Q, hidden});
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> CausalSelfAttentionImpl::ForwardWithQueries(
    const torch::Tensor& x, const torch::Tensor& xq, const torch::Tensor& query_blocked,
    const torch::Tensor* blocked) {
  const auto B = x.size(0), T = x.size(1), Q = xq.size(1);
  const int64_t head_dim = hidden / heads;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  const auto split = [&](const torch::Tensor& t, std::int64_t len) {
    // [B, len, 3H] -> [3, B, M, len, head_dim]
    return torch::linear(t, in_proj_weight, in_proj_bias)
        .view({B, len, 3, heads, head_dim})
        .permute({2, 0, 3, 1, 4});
  };
  const auto qkv = split(x, T), qkv_q = split(xq, Q);
  const auto q = qkv[0], k = qkv[1], v = qkv[2];
  const auto qq = qkv_q[0], kq = qkv_q[1], vq = qkv_q[2];
  // The context: causal or `blocked`, as in forward (no context token attends to a query).
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(blocked ? *blocked : torch::ones({T, T}, torch::kBool).triu(1),
                              -std::numeric_limits<float>::infinity());
  const auto out =
      torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, hidden});
  return {out_proj(out), out_proj(QueryAttention(qq, kq, vq, k, v, query_blocked, scale, hidden))};
}

torch::Tensor CausalSelfAttentionImpl::QueriesOnly(const torch::Tensor& x, const torch::Tensor& xq,
                                                   const torch::Tensor& query_blocked) {
  const auto B = x.size(0), T = x.size(1), Q = xq.size(1);
  const int64_t head_dim = hidden / heads;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  // The context's keys and values: rows H..3H of the packed projection -> [2, B, M, T, hd].
  const auto kv = torch::linear(x, in_proj_weight.slice(0, hidden, 3 * hidden),
                                in_proj_bias.slice(0, hidden, 3 * hidden))
                      .view({B, T, 2, heads, head_dim})
                      .permute({2, 0, 3, 1, 4});
  const auto qkv_q = torch::linear(xq, in_proj_weight, in_proj_bias)
                         .view({B, Q, 3, heads, head_dim})
                         .permute({2, 0, 3, 1, 4});
  return out_proj(
      QueryAttention(qkv_q[0], qkv_q[1], qkv_q[2], kv[0], kv[1], query_blocked, scale, hidden));
}

BlockImpl::BlockImpl(int hidden, int heads, int mlp_ratio, bool norm, int kernels_)
    : kernels(kernels_) {
  // Registration order = parameter order in checkpoints: ln1, ln2, attn, fc1, fc2.
  if (norm) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
  }
  attn = register_module("attn", CausalSelfAttention(hidden, heads, kernels_));
  fc1 = register_module("fc1", torch::nn::Linear(hidden, mlp_ratio * hidden));
  fc2 = register_module("fc2", torch::nn::Linear(mlp_ratio * hidden, hidden));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& h, torch::Tensor* attention,
                                 const torch::Tensor* blocked) {
  auto out = h + attn(ln1 ? ln1(h) : h, attention, blocked);
  return out + fc2(Gelu(fc1(ln2 ? ln2(out) : out), kernels));
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::ForwardWithQueries(
    const torch::Tensor& h, const torch::Tensor& hq, const torch::Tensor& query_blocked,
    const torch::Tensor* blocked) {
  auto [a, aq] =
      attn->ForwardWithQueries(ln1 ? ln1(h) : h, ln1 ? ln1(hq) : hq, query_blocked, blocked);
  auto out = h + a, out_q = hq + aq;
  out = out + fc2(Gelu(fc1(ln2 ? ln2(out) : out), kernels));
  out_q = out_q + fc2(Gelu(fc1(ln2 ? ln2(out_q) : out_q), kernels));
  return {out, out_q};
}

torch::Tensor BlockImpl::QueriesOnly(const torch::Tensor& h, const torch::Tensor& hq,
                                     const torch::Tensor& query_blocked) {
  const auto aq = attn->QueriesOnly(ln1 ? ln1(h) : h, ln1 ? ln1(hq) : hq, query_blocked);
  const auto out_q = hq + aq;
  return out_q + fc2(Gelu(fc1(ln2 ? ln2(out_q) : out_q), kernels));
}

torch::Tensor BottleneckMask(int bottleneck, int block, std::int64_t T) {
  if (bottleneck < 1 || block < 1)
    throw std::logic_error("transformer: BottleneckMask needs a bottleneck and a block >= 1");
  const auto t = torch::arange(T).unsqueeze(1), u = torch::arange(T).unsqueeze(0);
  const auto x_row = t.remainder(2) == 0;  // x-tokens at even positions, y-tokens at odd ones
  if (block <= bottleneck)
    // Blocks 1..l: x-tokens see only themselves, so state l of an x-token is a function of its
    // own token; y-tokens read the context causally.
    return (x_row & (u != t)) | (u > t);
  // Blocks l+1..L: a y-token's state s > l is a function of its state l alone, and an x-token
  // at 2k reads the context only through the y-token at 2k - 1. By induction over the blocks,
  // the x-token's state L, and so the prediction read there, is a function of x_{k+1} and of
  // state l of the y-token at 2k - 1: that state is the bottleneck.
  return (u != t) & (~x_row | (u != t - 1));
}

std::vector<torch::Tensor> TransformerImpl::BlockMasks(std::int64_t T) const {
  if (config.bottleneck == 0) return {};
  const auto early = BottleneckMask(config.bottleneck, 1, T);
  const auto late = BottleneckMask(config.bottleneck, config.bottleneck + 1, T);
  std::vector<torch::Tensor> masks;
  for (int b = 1; b <= config.layers; ++b)
    masks.push_back(b <= config.bottleneck ? early : late);
  return masks;
}

std::vector<torch::Tensor> TransformerImpl::QueryMasks(const torch::Tensor& at,
                                                       std::int64_t T) const {
  // A query row sees the context before its position (and itself, in the attention).
  const auto before = torch::arange(T).unsqueeze(0) >= at.unsqueeze(1);  // [Q, T]
  if (config.bottleneck == 0) return std::vector<torch::Tensor>(config.layers, before);
  std::vector<torch::Tensor> masks;
  for (const auto& m : BlockMasks(T + 1))
    masks.push_back(m.index_select(/*dim=*/0, at).slice(/*dim=*/1, 0, T) | before);
  return masks;
}

namespace {

const torch::Tensor* MaskOf(const std::vector<torch::Tensor>& masks, int block) {
  return masks.empty() ? nullptr : &masks[block];
}

}  // namespace

TransformerImpl::TransformerImpl(const ModelConfig& c)
    : config(c), input_proj(register_module("input_proj", torch::nn::Linear(c.d + 1, c.hidden))) {
  c.Validate();
  if (c.norm == "layer")
    final_ln =
        register_module("final_ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden})));
  readout = register_module("readout", torch::nn::Linear(c.hidden, 1));
  pos_embed = register_parameter("pos_embed", torch::randn({2L * c.n_max, c.hidden}) * 0.02);
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int l = 0; l < c.layers; ++l)
    blocks->push_back(Block(c.hidden, c.heads, c.mlp_ratio, c.norm == "layer", c.kernels));
  // Registered last, so that every other parameter draws the same initial values as in a model
  // without it.
  if (c.decoy_layer > 0)
    decoy_head = register_module("decoy_head", torch::nn::Linear(c.hidden, c.d));
}

torch::Tensor TransformerImpl::Embed(const torch::Tensor& tokens) {
  if (tokens.dim() != 3 || tokens.size(2) != config.d + 1 || tokens.size(1) > 2L * config.n_max)
    throw std::logic_error("transformer: tokens must be [B, T, d+1] with T <= 2 n_max, d=" +
                           std::to_string(config.d) + " and n <= " + std::to_string(config.n_max));
  const auto T = tokens.size(1);
  return input_proj(tokens) + pos_embed.slice(/*dim=*/0, 0, T);
}

torch::Tensor TransformerImpl::Readout(const torch::Tensor& h) {
  // Predictions are read at the x-tokens, positions 0, 2, 4, ...
  const auto x_states = h.slice(/*dim=*/1, /*start=*/0, /*end=*/h.size(1), /*step=*/2);
  return readout(final_ln ? final_ln(x_states) : x_states).squeeze(-1);
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& tokens) {
  auto h = Embed(tokens);
  const auto masks = BlockMasks(h.size(1));
  for (int b = 0; b < config.layers; ++b)
    h = blocks[b]->as<Block>()->forward(h, nullptr, MaskOf(masks, b));
  return Readout(h);
}

std::pair<torch::Tensor, torch::Tensor> TransformerImpl::ForwardWithDecoy(
    const torch::Tensor& tokens) {
  if (!decoy_head) throw std::logic_error("transformer: ForwardWithDecoy needs a decoy head");
  auto h = Embed(tokens);
  const auto masks = BlockMasks(h.size(1));
  torch::Tensor decoy;
  for (int b = 0; b < config.layers; ++b) {
    h = blocks[b]->as<Block>()->forward(h, nullptr, MaskOf(masks, b));
    if (b + 1 == config.decoy_layer) decoy = decoy_head(h.select(/*dim=*/1, h.size(1) - 1));
  }
  return {Readout(h), decoy};
}

ForwardResult TransformerImpl::Run(const torch::Tensor& tokens, const ForwardOptions& options) {
  ForwardResult r;
  auto h = Embed(tokens);
  if (options.hidden_states) r.hidden.push_back(h);
  const auto masks = BlockMasks(h.size(1));
  for (int b = 0; b < config.layers; ++b) {
    torch::Tensor weights;
    h = blocks[b]->as<Block>()->forward(h, options.attention ? &weights : nullptr,
                                        MaskOf(masks, b));
    if (options.hidden_states) r.hidden.push_back(h);
    if (options.attention) r.attention.push_back(weights);
  }
  r.predictions = Readout(h);
  return r;
}

torch::Tensor TransformerImpl::RunFrom(int layer, const torch::Tensor& state) {
  if (layer < 0 || layer > config.layers)
    throw std::logic_error("transformer: state " + std::to_string(layer) + " is outside 0.." +
                           std::to_string(config.layers));
  if (state.dim() != 3 || state.size(2) != config.hidden || state.size(1) > 2L * config.n_max)
    throw std::logic_error("transformer: a state must be [B, T, " + std::to_string(config.hidden) +
                           "] with T <= 2 n_max");
  auto h = state;
  const auto masks = BlockMasks(h.size(1));
  for (int b = layer; b < config.layers; ++b)
    h = blocks[b]->as<Block>()->forward(h, nullptr, MaskOf(masks, b));
  return Readout(h);
}

torch::Tensor TransformerImpl::QueryForward(const torch::Tensor& tokens,
                                            const torch::Tensor& queries,
                                            const std::vector<std::int64_t>& positions) {
  const auto T = tokens.size(1), Q = static_cast<std::int64_t>(positions.size());
  if (queries.dim() != 3 || queries.size(0) != tokens.size(0) || queries.size(1) != Q ||
      queries.size(2) != config.d)
    throw std::logic_error("transformer: queries must be [B, Q, d] with one position each");
  for (const auto p : positions)
    if (p < 0 || p >= T || p % 2 != 0)
      throw std::logic_error("transformer: a query position must be an x-token of the context");
  // The query tokens [0, x]: embedded at their positions.
  auto query_tokens = torch::zeros({tokens.size(0), Q, config.d + 1L}, tokens.options());
  query_tokens.slice(/*dim=*/2, 1, config.d + 1).copy_(queries);
  const auto at = torch::tensor(positions, torch::kLong);
  auto h = Embed(tokens);
  auto hq = input_proj(query_tokens) + pos_embed.index_select(0, at);
  const auto masks = BlockMasks(T);
  const auto query_masks = QueryMasks(at, T);
  for (int b = 0; b < config.layers; ++b)
    std::tie(h, hq) =
        blocks[b]->as<Block>()->ForwardWithQueries(h, hq, query_masks[b], MaskOf(masks, b));
  return readout(final_ln ? final_ln(hq) : hq).squeeze(-1);
}

torch::Tensor TransformerImpl::QueriesFrom(int layer, const std::vector<torch::Tensor>& context,
                                           const torch::Tensor& hq,
                                           const std::vector<std::int64_t>& positions) {
  if (layer < 0 || layer > config.layers ||
      context.size() != static_cast<std::size_t>(config.layers - layer))
    throw std::logic_error("transformer: QueriesFrom needs the context's states " +
                           std::to_string(layer) + ".." + std::to_string(config.layers - 1));
  const auto Q = static_cast<std::int64_t>(positions.size());
  if (hq.dim() != 3 || hq.size(1) != Q || hq.size(2) != config.hidden)
    throw std::logic_error("transformer: query states must be [B, Q, H] with one position each");
  torch::Tensor h = hq;
  if (!context.empty()) {
    const auto T = context[0].size(1);
    for (const auto p : positions)
      if (p < 0 || p > T)
        throw std::logic_error("transformer: a query position is past the context");
    const auto query_masks = QueryMasks(torch::tensor(positions, torch::kLong), T);
    for (int b = layer; b < config.layers; ++b)
      h = blocks[b]->as<Block>()->QueriesOnly(context[b - layer], h, query_masks[b]);
  }
  return readout(final_ln ? final_ln(h) : h).squeeze(-1);
}

std::int64_t CountParameters(torch::nn::Module& module) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters())
    n += p.numel();
  return n;
}

}  // namespace icl::learners
