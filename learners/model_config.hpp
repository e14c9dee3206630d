// Configuration of a transformer learner and of its training run, stored as JSON in
// checkpoints. Torch-free, so that code that only reads configs stays light.
#pragma once

#include <cstdint>
#include <string>

#include "data/task.hpp"

namespace icl::learners {

// Limits beyond which a configuration is refused as an input error rather than failing in
// LibTorch with a stack trace or exhausting memory.
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxHidden = 65536;
inline constexpr double kMaxParameters = 4e9;
inline constexpr int kMaxBatch = 1 << 20;
inline constexpr int kMaxEvalPrompts = 1 << 22;

struct ModelConfig {
  int d = 4;          // input dimension; tokens have width d + 1
  int n_max = 12;     // longest prompt (examples); 2 n_max positions are embedded
  int layers = 8;     // L
  int hidden = 64;    // H
  int heads = 4;      // M; H must be a multiple of M
  int mlp_ratio = 4;  // MLP width = mlp_ratio * H
  // "layer": pre-LayerNorm blocks and a final LayerNorm (trained learners, the paper's).
  // "none": no normalisation anywhere, the residual stream passes unchanged into attention,
  // MLP and readout. Constructed models (construct/) need it: their weights compute exact
  // quantities in fixed rows, which a LayerNorm would rescale.
  std::string norm = "layer";
  // The arithmetic of the forward and backward pass, recorded so that a run resumes and a
  // checkpoint is extracted with the arithmetic it was made with. 1: LibTorch's operators
  // throughout (every file written before this setting existed; imported and constructed
  // models, whose reference is LibTorch's or PyTorch's GELU). 2: the MLP's GELU fused
  // (learners/gelu.hpp; the same function to float32 rounding, a quarter to a third of a
  // training step faster). 3: the GELU and the causal attention fused (learners/attention.hpp:
  // every prompt and head in one pass instead of one dispatched product each). New training runs
  // use 3.
  int kernels = 3;
  // A bottleneck learner (0: none, every block causal). With bottleneck = l in 1..L-1 the blocks'
  // attention is masked so that everything the prediction at an x-token uses about the context
  // passes through one state of one y-token, which cannot see the query: states are numbered
  // s = 0 (the embedding) .. L (after block s), x-tokens sit at even positions 2i and y-tokens
  // at odd positions 2i + 1, and
  //   blocks 1..l:     an x-token attends to itself only; a y-token to every position <= its own;
  //   blocks l+1..L:   a y-token attends to itself only; an x-token at t to itself and to t - 1.
  // The prediction at the x-token of example k + 1 (position 2k) is then a function of x_{k+1}
  // and of state l of the y-token at 2k - 1 alone (TransformerImpl applies the masks).
  int bottleneck = 0;
  // A trained decoy (0: none). With decoy_layer = s in 1..L a linear head (H -> d, "decoy_head")
  // reads state s of the sequence's last position, the y-token of its last example, which no
  // prediction reads (every prediction sits at an earlier x-token, and attention is causal), and
  // training adds the head's squared error on decoy_target to the loss, so that the quantity
  // becomes linearly decodable there and is used by nothing:
  //   "xty":    X'y / n, the moment vector of the prompt's n examples;
  //   "sigma":  the noise level the prompt drew (a noise-mix task only), in every coordinate.
  // The head changes no prediction: a model without it computes the same predictions.
  int decoy_layer = 0;
  std::string decoy_target;

  void Validate() const;  // throws core::InputError naming the field
  std::string ToJson() const;
  static ModelConfig FromJson(const std::string& json, const std::string& what);
};
bool operator==(const ModelConfig& a, const ModelConfig& b);

// The decoy targets ModelConfig::decoy_target names.
inline constexpr const char* kDecoyTargets = "xty, sigma";

struct TrainConfig {
  data::TaskConfig task;  // the training distribution (n = prompt length used in training)
  std::int64_t steps = 20000;
  int batch = 64;
  double lr = 1e-3;
  std::int64_t warmup = -1;  // linear warmup steps; -1: steps / 5, as in the paper
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-8, weight_decay = 0.0;
  double clip = 1.0;       // max global gradient norm; 0 disables clipping
  std::uint64_t seed = 1;  // initialisation and training prompts
  std::int64_t eval_every = 500;
  int eval_prompts = 2000;
  std::uint64_t eval_seed = 999;  // held-out prompts; fixed so runs are comparable
  std::int64_t save_every = 1000;
  // Each batch is computed as this many shards (rows split evenly, each its own forward and
  // backward pass, run on as many threads as the caller allows) whose gradients are summed in
  // shard order: the result does not depend on the number of threads. Files written before
  // shards existed computed the batch whole: 1.
  int shards = 2;

  std::int64_t WarmupSteps() const { return warmup >= 0 ? warmup : steps / 5; }
  // Learning rate at a 0-based step: linear warmup, then cosine decay to 0.
  double LearningRate(std::int64_t step) const;
  void Validate() const;
  std::string ToJson() const;
  static TrainConfig FromJson(const std::string& json, const std::string& what);
};

}  // namespace icl::learners
