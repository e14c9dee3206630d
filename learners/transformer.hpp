// The transformer in-context learner (docs/paper.md "Learner architecture"): input projection
// (d+1 -> H), learned absolute positions, L pre-LayerNorm blocks (causal multi-head attention,
// GELU(tanh) MLP of width mlp_ratio * H), final LayerNorm, readout H -> 1 at the x-tokens.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "learners/model_config.hpp"

namespace icl::learners {

// Causal multi-head self-attention. Parameters are named like torch.nn.MultiheadAttention's
// (in_proj_weight [3H, H], in_proj_bias [3H], out_proj.{weight, bias}).
struct CausalSelfAttentionImpl : torch::nn::Module {
  // kernels >= 3: the causal attention of `forward` is FusedCausalAttention (attention.hpp).
  CausalSelfAttentionImpl(int hidden, int heads, int kernels = 1);
  // x: [B, T, H]. When `weights` is not null it receives the attention weights [B, M, T, T].
  // `blocked` [T, T] (bool, true: query row may not attend to key column) replaces the causal
  // mask when given; the attention is then LibTorch's operators whatever `kernels` says (the
  // fused kernel is causal only).
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* weights = nullptr,
                        const torch::Tensor* blocked = nullptr);
  // The context x [B, T, H] under the causal mask (or under `blocked` [T, T] when given, as in
  // forward), and query rows xq [B, Q, H] that attend to the context keys their row of
  // `query_blocked` [Q, T] leaves open and to themselves, while no row attends to a query: the
  // attention of one sequence of T + Q tokens with that mask, at Q x T scores instead of
  // (T + Q)^2. Returns {context out, query out}.
  std::pair<torch::Tensor, torch::Tensor> ForwardWithQueries(
      const torch::Tensor& x, const torch::Tensor& xq, const torch::Tensor& query_blocked,
      const torch::Tensor* blocked = nullptr);
  // The query rows' output alone, the context x given: ForwardWithQueries without the context's
  // own attention (its keys and values only).
  torch::Tensor QueriesOnly(const torch::Tensor& x, const torch::Tensor& xq,
                            const torch::Tensor& query_blocked);

  int hidden, heads, kernels;
  torch::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

// h + attn(ln1(h)), then h + mlp(ln2(h)); without norm (ModelConfig::norm "none") ln1 and ln2
// are absent and the sublayers read h itself.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int hidden, int heads, int mlp_ratio, bool norm = true, int kernels = 1);
  torch::Tensor forward(const torch::Tensor& h, torch::Tensor* attention = nullptr,
                        const torch::Tensor* blocked = nullptr);
  // The block on context states h and query states hq (CausalSelfAttention::ForwardWithQueries;
  // `blocked`: the context's mask, causal when null).
  std::pair<torch::Tensor, torch::Tensor> ForwardWithQueries(
      const torch::Tensor& h, const torch::Tensor& hq, const torch::Tensor& query_blocked,
      const torch::Tensor* blocked = nullptr);
  // The query states after the block, the context's states h before it given.
  torch::Tensor QueriesOnly(const torch::Tensor& h, const torch::Tensor& hq,
                            const torch::Tensor& query_blocked);

  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  int kernels = 1;  // the GELU's and attention's arithmetic (ModelConfig::kernels)
};
TORCH_MODULE(Block);

// The attention mask of block `block` (1..L) of a bottleneck learner (ModelConfig::bottleneck
// = `bottleneck` >= 1) over T positions: [T, T] bool, true where row t may not attend to column u
// (CausalSelfAttention's `blocked`). Blocks 1..bottleneck: an x-token (t even) sees only itself,
// a y-token (t odd) every u <= t; later blocks: a y-token sees only itself, an x-token itself and
// u = t - 1. Every open entry has u <= t: the masks are causal, so no position depends on a later
// one and a prefix of a sequence computes what it computes alone.
torch::Tensor BottleneckMask(int bottleneck, int block, std::int64_t T);

// What a forward pass can return besides the predictions.
struct ForwardOptions {
  bool hidden_states = false;  // L + 1 states [B, 2n, H]: embedding, then after each block
  bool attention = false;      // per layer [B, M, 2n, 2n]
};
struct ForwardResult {
  torch::Tensor predictions;  // [B, n]: prediction k read at the x-token of example k + 1
  std::vector<torch::Tensor> hidden;
  std::vector<torch::Tensor> attention;
};

// Every entry point below applies ModelConfig::bottleneck's masks (BottleneckMask) to context
// and query rows alike when it is set; without it the blocks are causal.
struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const ModelConfig& config);
  // tokens: [B, 2n, d + 1] (n <= n_max) -> predictions [B, n]. The cheap path.
  torch::Tensor forward(const torch::Tensor& tokens);
  ForwardResult Run(const torch::Tensor& tokens, const ForwardOptions& options);
  // The rest of a forward pass from hidden state `layer` (0 = the embedding, l = after block l):
  // state [B, 2n, H] -> predictions [B, n]. On the unedited state it gives Run's predictions:
  // the entry point of interventions.
  torch::Tensor RunFrom(int layer, const torch::Tensor& state);
  // Predictions at query x-tokens placed after prefixes of the context, many in one pass:
  // tokens [B, 2n, d + 1] (the context), queries [B, Q, d] (x of each query), positions [Q]
  // (query j sits at the even position 2k: after the first k examples) -> [B, Q]. A query
  // token attends to the context tokens before its position and to itself (those of them its
  // position's row of a bottleneck mask leaves open), and no token
  // attends to a query, so each equals the prediction of its own sequence (the first k
  // examples, then the query) up to float32 summation order: Q sequences of up to 2n tokens
  // become one pass over 2n context tokens and Q query tokens, whose attention costs Q x 2n
  // scores per head (each query against the context, plus itself), not (2n + Q)^2.
  torch::Tensor QueryForward(const torch::Tensor& tokens, const torch::Tensor& queries,
                             const std::vector<std::int64_t>& positions);
  // The rest of a forward pass from state `layer` for query rows alone, when the context's
  // states are known: context[j] [B, T, H] is the context's state layer + j (j = 0..L - layer - 1,
  // the input of block layer + j + 1), hq [B, Q, H] the queries' state `layer`, query j at
  // position positions[j] (it attends to the context before it and to itself) -> predictions
  // [B, Q]. A query at position p of a sequence whose earlier states are those of the context
  // gets RunFrom's prediction at p up to float32 summation order (no earlier position depends on
  // a later one): an edit of the query's state costs one token per block instead of T + 1.
  torch::Tensor QueriesFrom(int layer, const std::vector<torch::Tensor>& context,
                            const torch::Tensor& hq, const std::vector<std::int64_t>& positions);
  // forward's predictions [B, n] and the decoy head's reading [B, d] of state
  // config.decoy_layer at the last position, in one pass (the trainer's path for a decoy).
  std::pair<torch::Tensor, torch::Tensor> ForwardWithDecoy(const torch::Tensor& tokens);

  ModelConfig config;
  torch::nn::Linear input_proj{nullptr};
  torch::Tensor pos_embed;  // [2 n_max, H]
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm final_ln{nullptr};  // absent when config.norm == "none"
  torch::nn::Linear readout{nullptr};
  torch::nn::Linear decoy_head{nullptr};  // only with config.decoy_layer

 private:
  torch::Tensor Embed(const torch::Tensor& tokens);
  torch::Tensor Readout(const torch::Tensor& h);
  // The mask of each block 0..L-1 (block b + 1 in BottleneckMask's numbering) over T positions,
  // built once per call: two distinct tensors shared among the blocks. Empty without a
  // bottleneck.
  std::vector<torch::Tensor> BlockMasks(std::int64_t T) const;
  // The query rows' masks [Q, T] of each block against a context of T positions, queries at
  // `at` [Q] (<= T): row p of the block's mask over T + 1 positions with the columns >= p
  // closed (there the context is not the query's own sequence). Without a bottleneck: the one
  // causal mask u >= p for every block.
  std::vector<torch::Tensor> QueryMasks(const torch::Tensor& at, std::int64_t T) const;
};
TORCH_MODULE(Transformer);

// Number of trainable scalars.
std::int64_t CountParameters(torch::nn::Module& module);

}  // namespace icl::learners
