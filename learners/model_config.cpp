// ModelConfig / TrainConfig: validation, JSON, the learning-rate schedule.
#include "learners/model_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace icl::learners {

namespace {

void Require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

void ModelConfig::Validate() const {
  Require(d > 0, "model: d must be positive, got " + std::to_string(d));
  Require(n_max > 0, "model: n_max must be positive, got " + std::to_string(n_max));
  Require(layers >= 0, "model: layers must be non-negative, got " + std::to_string(layers));
  Require(hidden > 0, "model: hidden must be positive, got " + std::to_string(hidden));
  Require(heads > 0, "model: heads must be positive, got " + std::to_string(heads));
  Require(hidden % heads == 0, "model: hidden (" + std::to_string(hidden) +
                                   ") must be a multiple of heads (" + std::to_string(heads) + ")");
  Require(mlp_ratio > 0, "model: mlp_ratio must be positive, got " + std::to_string(mlp_ratio));
}

std::string ModelConfig::ToJson() const {
  return nlohmann::json{{"d", d},           {"n_max", n_max}, {"layers", layers},
                        {"hidden", hidden}, {"heads", heads}, {"mlp_ratio", mlp_ratio}}
      .dump();
}

ModelConfig ModelConfig::FromJson(const std::string& json, const std::string& what) {
  ModelConfig c;
  try {
    const auto j = nlohmann::json::parse(json);
    c.d = j.at("d").get<int>();
    c.n_max = j.at("n_max").get<int>();
    c.layers = j.at("layers").get<int>();
    c.hidden = j.at("hidden").get<int>();
    c.heads = j.at("heads").get<int>();
    c.mlp_ratio = j.value("mlp_ratio", 4);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not a valid model config (" + e.what() + ")");
  }
  try {
    c.Validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
  return c;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return a.d == b.d && a.n_max == b.n_max && a.layers == b.layers && a.hidden == b.hidden &&
         a.heads == b.heads && a.mlp_ratio == b.mlp_ratio;
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
  Require(steps >= 0, "train: steps must be non-negative, got " + std::to_string(steps));
  Require(batch > 0, "train: batch must be positive, got " + std::to_string(batch));
  Require(lr > 0 && std::isfinite(lr), "train: lr must be a positive number");
  Require(warmup >= -1, "train: warmup must be -1 (steps / 5) or a step count");
  Require(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "train: betas must lie in [0, 1)");
  Require(eps > 0, "train: eps must be positive");
  Require(weight_decay >= 0, "train: weight decay must be non-negative");
  Require(clip >= 0, "train: clip must be non-negative (0 disables clipping)");
  Require(eval_every > 0, "train: eval_every must be positive, got " + std::to_string(eval_every));
  Require(eval_prompts > 0,
          "train: eval_prompts must be positive, got " + std::to_string(eval_prompts));
  Require(save_every > 0, "train: save_every must be positive, got " + std::to_string(save_every));
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
                      {"optimizer", "adamw"},
                      {"schedule", "linear warmup, cosine decay to 0"}};
  return j.dump();
}

TrainConfig TrainConfig::FromJson(const std::string& json, const std::string& what) {
  TrainConfig c;
  try {
    const auto j = nlohmann::json::parse(json);
    c.task = data::TaskConfig::FromJson(j.at("task").dump(), what);
    c.steps = j.at("steps").get<std::int64_t>();
    c.batch = j.at("batch").get<int>();
    c.lr = j.at("lr").get<double>();
    c.warmup = j.at("warmup").get<std::int64_t>();
    c.beta1 = j.at("beta1").get<double>();
    c.beta2 = j.at("beta2").get<double>();
    c.eps = j.at("eps").get<double>();
    c.weight_decay = j.at("weight_decay").get<double>();
    c.clip = j.at("clip").get<double>();
    c.seed = j.at("seed").get<std::uint64_t>();
    c.eval_every = j.at("eval_every").get<std::int64_t>();
    c.eval_prompts = j.at("eval_prompts").get<int>();
    c.eval_seed = j.at("eval_seed").get<std::uint64_t>();
    c.save_every = j.at("save_every").get<std::int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not a valid train config (" + e.what() + ")");
  }
  return c;
}

}  // namespace icl::learners
