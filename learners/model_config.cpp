// ModelConfig / TrainConfig: validation, JSON, the learning-rate schedule.
#include "learners/model_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/json.hpp"

namespace icl::learners {

namespace {

// `module`: "model" or "train"; `field`: the setting at fault, named as the program's option.
void Require(bool ok, const char* module, const std::string& field, const std::string& text) {
  if (!ok) throw core::InputError(module, field, text);
}

}  // namespace

void ModelConfig::Validate() const {
  Require(d > 0 && d <= data::kMaxD, "model", "d",
          "must be in 1.." + std::to_string(data::kMaxD) + ", got " + std::to_string(d));
  Require(n_max > 0 && n_max <= data::kMaxN, "model", "n",
          "n_max must be in 1.." + std::to_string(data::kMaxN) + ", got " + std::to_string(n_max));
  Require(layers >= 1 && layers <= kMaxLayers, "model", "layers",
          "must be in 1.." + std::to_string(kMaxLayers) + ", got " + std::to_string(layers));
  Require(hidden > 0 && hidden <= kMaxHidden, "model", "hidden",
          "must be in 1.." + std::to_string(kMaxHidden) + ", got " + std::to_string(hidden));
  Require(heads > 0, "model", "heads", "must be positive, got " + std::to_string(heads));
  Require(hidden % heads == 0, "model", "hidden",
          std::to_string(hidden) + " is not a multiple of {heads} " + std::to_string(heads));
  Require(norm == "layer" || norm == "none", "model", "norm",
          "must be \"layer\" or \"none\", got \"" + norm + "\"");
  Require(kernels >= 1 && kernels <= 3, "model", "kernels",
          "must be 1 (LibTorch's operators), 2 (fused GELU) or 3 (fused GELU and attention), got " +
              std::to_string(kernels));
  // State 0 (the embedding) cannot be the bottleneck (no block would have read the context into
  // it), nor can state L (no block would be left to carry it to the x-token).
  Require(bottleneck == 0 || (bottleneck >= 1 && bottleneck <= layers - 1), "model", "bottleneck",
          "must be 0 (none) or in 1..L-1 = 1.." + std::to_string(layers - 1) + " (L = {layers}; " +
              "the y-tokens' state after that block is the bottleneck), got " +
              std::to_string(bottleneck));
  Require(decoy_layer >= 0 && decoy_layer <= layers, "model", "decoy_layer",
          "must be 0 (none) or a state in 1..L = 1.." + std::to_string(layers) +
              " (L = {layers}), got " + std::to_string(decoy_layer));
  Require(decoy_layer == 0 || decoy_target == "xty" || decoy_target == "sigma", "model",
          "decoy_target",
          "must be one of " + std::string(kDecoyTargets) + " with a decoy layer, got \"" +
              decoy_target + "\"");
  Require(decoy_layer != 0 || decoy_target.empty(), "model", "decoy_target",
          "\"" + decoy_target + "\" needs a {decoy_layer}: the state whose head learns it");
  Require(mlp_ratio > 0 && mlp_ratio <= 64, "model", "mlp_ratio",
          "must be in 1..64, got " + std::to_string(mlp_ratio));
  // About 12 H^2 parameters per block (attention 4 H^2, MLP 2 r H^2): refuse what cannot fit
  // in memory before LibTorch fails with a stack trace.
  const double params = double(layers) * (4.0 + 2.0 * mlp_ratio) * double(hidden) * hidden +
                        2.0 * n_max * double(hidden) + (d + 2.0) * hidden;
  Require(params <= kMaxParameters, "model", "hidden",
          "about " + std::to_string(static_cast<long long>(params)) +
              " parameters, more than the " +
              std::to_string(static_cast<long long>(kMaxParameters)) + " iclprobe accepts");
}

std::string ModelConfig::ToJson() const {
  nlohmann::json j{{"d", d},           {"n_max", n_max}, {"layers", layers},
                   {"hidden", hidden}, {"heads", heads}, {"mlp_ratio", mlp_ratio}};
  // Written only when not the default, so that files of trained learners keep their exact
  // configuration text (resume compares it).
  if (norm != "layer") j["norm"] = norm;
  if (kernels != 1) j["kernels"] = kernels;  // absent: 1, the files from before the setting
  if (bottleneck != 0) j["bottleneck"] = bottleneck;  // absent: none
  if (decoy_layer != 0) {                             // absent: none
    j["decoy_layer"] = decoy_layer;
    j["decoy_target"] = decoy_target;
  }
  return j.dump();
}

ModelConfig ModelConfig::FromJson(const std::string& json, const std::string& what) {
  ModelConfig c;
  const auto j = core::json::Parse(json, what);
  c.d = static_cast<int>(core::json::Int(j, "d", what, 1, data::kMaxD));
  c.n_max = static_cast<int>(core::json::Int(j, "n_max", what, 1, data::kMaxN));
  c.layers = static_cast<int>(core::json::Int(j, "layers", what, 0, kMaxLayers));
  c.hidden = static_cast<int>(core::json::Int(j, "hidden", what, 1, kMaxHidden));
  c.heads = static_cast<int>(core::json::Int(j, "heads", what, 1, kMaxHidden));
  c.mlp_ratio =
      j.contains("mlp_ratio") ? static_cast<int>(core::json::Int(j, "mlp_ratio", what, 1, 64)) : 4;
  c.norm = j.contains("norm") ? core::json::String(j, "norm", what) : "layer";
  c.kernels =
      j.contains("kernels") ? static_cast<int>(core::json::Int(j, "kernels", what, 1, 3)) : 1;
  // The range L - 1 is Validate()'s, which names the setting.
  c.bottleneck = j.contains("bottleneck")
                     ? static_cast<int>(core::json::Int(j, "bottleneck", what, 0, kMaxLayers))
                     : 0;
  if (j.contains("decoy_layer")) {
    c.decoy_layer = static_cast<int>(core::json::Int(j, "decoy_layer", what, 0, kMaxLayers));
    c.decoy_target = core::json::String(j, "decoy_target", what);
  }
  try {
    c.Validate();
  } catch (const std::invalid_argument& e) {
    throw core::InputError(what, "", e.what());
  }
  return c;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return a.d == b.d && a.n_max == b.n_max && a.layers == b.layers && a.hidden == b.hidden &&
         a.heads == b.heads && a.mlp_ratio == b.mlp_ratio && a.norm == b.norm &&
         a.kernels == b.kernels && a.bottleneck == b.bottleneck && a.decoy_layer == b.decoy_layer &&
         a.decoy_target == b.decoy_target;
}

double TrainConfig::LearningRate(std::int64_t step) const {
  const std::int64_t w = WarmupSteps();
  if (step < w) return lr * static_cast<double>(step + 1) / static_cast<double>(w);
  const double span = std::max<std::int64_t>(1, steps - w);
  const double progress = std::min(1.0, static_cast<double>(step - w) / span);
  return lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

void TrainConfig::Validate() const {
  task.Validate();
  Require(!task.HasQueries(), "train", "query_shift",
          "training reads every example's prediction in one sequence; a query shift is for "
          "evaluation (baselines, compare)");
  Require(steps >= 0, "train", "steps", "must be non-negative, got " + std::to_string(steps));
  Require(batch > 0, "train", "batch", "must be positive, got " + std::to_string(batch));
  Require(batch <= kMaxBatch, "train", "batch", "must be at most " + std::to_string(kMaxBatch));
  Require(lr > 0 && std::isfinite(lr), "train", "lr", "must be a positive number");
  Require(warmup >= -1, "train", "warmup", "must be -1 (steps / 5) or a step count");
  Require(beta1 >= 0 && beta1 < 1, "train", "beta1", "must lie in [0, 1)");
  Require(beta2 >= 0 && beta2 < 1, "train", "beta2", "must lie in [0, 1)");
  Require(eps > 0 && std::isfinite(eps), "train", "eps", "must be positive");
  Require(weight_decay >= 0 && std::isfinite(weight_decay), "train", "weight_decay",
          "must be non-negative");
  Require(clip >= 0 && std::isfinite(clip), "train", "clip",
          "must be non-negative (0 disables clipping)");
  Require(eval_every > 0, "train", "eval_every",
          "must be positive, got " + std::to_string(eval_every));
  Require(
      eval_prompts > 0 && eval_prompts <= kMaxEvalPrompts, "train", "eval_prompts",
      "must be in 1.." + std::to_string(kMaxEvalPrompts) + ", got " + std::to_string(eval_prompts));
  Require(save_every > 0, "train", "save_every",
          "must be positive, got " + std::to_string(save_every));
  // The optimizer computes in float32: a setting beyond its range would fail deep in LibTorch
  // ("cannot be converted to type float without overflow") instead of here.
  constexpr double kFloatMax = 3.4e38;
  Require(lr <= kFloatMax, "train", "lr", "must fit float32 (at most 3.4e38)");
  Require(eps <= kFloatMax, "train", "eps", "must fit float32 (at most 3.4e38)");
  Require(weight_decay <= kFloatMax, "train", "weight_decay", "must fit float32 (at most 3.4e38)");
  Require(clip <= kFloatMax, "train", "clip", "must fit float32 (at most 3.4e38)");
  Require(shards >= 1 && shards <= batch, "train", "shards",
          "must be in 1..{batch} = " + std::to_string(batch) + ", got " + std::to_string(shards));
}

std::string TrainConfig::ToJson() const {
  nlohmann::json j = {{"task", nlohmann::json::parse(task.ToJson())},
                      {"steps", steps},
                      {"batch", batch},
                      {"lr", lr},
                      {"warmup", WarmupSteps()},
                      {"beta1", beta1},
                      {"beta2", beta2},
                      {"eps", eps},
                      {"weight_decay", weight_decay},
                      {"clip", clip},
                      {"seed", seed},
                      {"eval_every", eval_every},
                      {"eval_prompts", eval_prompts},
                      {"eval_seed", eval_seed},
                      {"save_every", save_every},
                      {"shards", shards},
                      {"optimizer", "adamw"},
                      {"schedule", "linear warmup, cosine decay to 0"}};
  return j.dump();
}

TrainConfig TrainConfig::FromJson(const std::string& json, const std::string& what) {
  namespace js = core::json;
  TrainConfig c;
  const auto j = js::Parse(json, what);
  if (!j.is_object() || !j.contains("task") || !j["task"].is_object())
    throw core::InputError(what, "", "'task' is missing or not an object");
  c.task = data::TaskConfig::FromJson(j["task"].dump(), what + " task");
  constexpr std::int64_t kBig = std::int64_t(1) << 53;
  c.steps = js::Int(j, "steps", what, 0, kBig);
  c.batch = static_cast<int>(js::Int(j, "batch", what, 1, kMaxBatch));
  c.lr = js::Number(j, "lr", what);
  c.warmup = js::Int(j, "warmup", what, -1, kBig);
  c.beta1 = js::Number(j, "beta1", what);
  c.beta2 = js::Number(j, "beta2", what);
  c.eps = js::Number(j, "eps", what);
  c.weight_decay = js::Number(j, "weight_decay", what);
  c.clip = js::Number(j, "clip", what);
  c.seed = js::UInt(j, "seed", what);
  c.eval_every = js::Int(j, "eval_every", what, 1, kBig);
  c.eval_prompts = static_cast<int>(js::Int(j, "eval_prompts", what, 1, kMaxEvalPrompts));
  c.eval_seed = js::UInt(j, "eval_seed", what);
  c.save_every = js::Int(j, "save_every", what, 1, kBig);
  c.shards = j.contains("shards") ? static_cast<int>(js::Int(j, "shards", what, 1, kMaxBatch)) : 1;
  // A stored configuration passes the same checks as one built from options.
  try {
    c.Validate();
  } catch (const std::invalid_argument& e) {
    throw core::InputError(what, "", e.what());
  }
  return c;
}

}  // namespace icl::learners
