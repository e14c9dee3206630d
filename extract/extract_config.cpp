// The Extract stage's configuration: its checks against the checkpoint's model, the JSON that
// identifies a file's content, and the learner targets (their specs and their weights).
#include "extract/extract.hpp"
#include "extract/extract_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "extract/activations_schema.hpp"
#include "learners/classical.hpp"

namespace icl::extract {

int ChunkRows(std::size_t row_bytes) {
  const std::int64_t rows =
      std::llround(double(1 << 20) / std::max<std::size_t>(1, row_bytes) / kComputeGroup);
  return static_cast<int>(std::max<std::int64_t>(1, rows) * kComputeGroup);
}

std::string ExtractConfig::ContentJson(const learners::ModelConfig& model) const {
  nlohmann::json j = {{"task", nlohmann::json::parse(task.ToJson())},
                      {"prompts", prompts},
                      {"seed", seed},
                      {"layers", layers},
                      {"positions", PositionsName(positions)},
                      {"ridge_lambda", ridge_lambda},
                      {"compress", compress},
                      {"model", nlohmann::json::parse(model.ToJson())}};
  if (float16) j["hidden_dtype"] = "float16";  // absent: float32 (files from before the option)
  if (!learner_targets.empty()) j["learner_targets"] = learner_targets;  // absent: none
  return j.dump();
}

namespace {

// The learner of a learner target: a spec that parses and names a linear learner with weights
// (knn has none, zero's are always 0). Both front ends come through here.
std::unique_ptr<learners::ClassicalLearner> StorableLearner(const std::string& spec,
                                                            const data::TaskConfig& task,
                                                            const std::string& field) {
  auto learner = learners::MakeLearner(spec, task, field);
  if (!learner->is_linear() || learner->spec() == "zero")
    throw core::InputError("extract", field,
                           spec +
                               " has no weight vector to store (only linear learners with "
                               "weights: ols, ridge, bayes, gd, sgd, newton)");
  return learner;
}

}  // namespace

void ExtractConfig::Validate(const learners::ModelConfig& model) const {
  const ExtractConfig& c = *this;
  if (c.task.HasQueries())
    throw core::InputError(
        "extract", "query_shift",
        "the activations hold the states of the prompt's own tokens, and a shifted "
        "query has none there; give a context shift (a query shift is for "
        "predictions: baselines, compare)");
  if (c.prompts <= 0)
    throw core::InputError("extract", "prompts",
                           "must be positive, got " + std::to_string(c.prompts));
  if (c.batch <= 0)
    throw core::InputError("extract", "batch", "must be positive, got " + std::to_string(c.batch));
  if (!(c.ridge_lambda >= 0) || !std::isfinite(c.ridge_lambda))
    throw core::InputError("extract", "ridge_lambda", "must be a finite non-negative number");
  if (c.task.d != model.d)
    throw core::InputError(
        "checkpoint '" + c.checkpoint + "'", "",
        "has d=" + std::to_string(model.d) + " but the prompts have d=" + std::to_string(c.task.d));
  if (c.task.n <= 0 || c.task.n > model.n_max)
    throw core::InputError("extract", "n",
                           "the checkpoint '" + c.checkpoint + "' reads 1.." +
                               std::to_string(model.n_max) + " examples, got " +
                               std::to_string(c.task.n));
  c.task.Validate();
  std::set<int> seen;
  for (int l : c.layers) {
    if (l < 0 || l > model.layers)
      throw core::InputError("extract", "layers",
                             "layer " + std::to_string(l) +
                                 " does not exist; the model has states 0.." +
                                 std::to_string(model.layers) + " (0 = embedding)");
    if (!seen.insert(l).second)
      throw core::InputError("extract", "layers",
                             "layer " + std::to_string(l) + " is listed twice");
  }
  std::set<std::string> names;
  for (const auto& s : schema::PerPromptDatasets(c.task.n, c.task.d, {}, c.task.family))
    names.insert(s.name);
  for (const std::string& spec : c.learner_targets) {
    const auto learner = StorableLearner(spec, c.task, "learner_targets");
    if (learner->spec() != spec)
      throw core::InputError("extract", "learner_targets",
                             "write " + spec + " as " + learner->spec() +
                                 " (the spec's canonical form, which names the dataset)");
    if (!names.insert(schema::LearnerTarget(spec)).second)
      throw core::InputError("extract", "learner_targets",
                             spec + ": /" + schema::LearnerTarget(spec) +
                                 " is stored already (listed twice, or a built-in target)");
  }
}

std::vector<std::string> CanonicalLearnerSpecs(const std::vector<std::string>& specs,
                                               const data::TaskConfig& task,
                                               const std::string& field) {
  std::vector<std::string> out;
  for (const std::string& spec : specs)
    out.push_back(StorableLearner(spec, task, field)->spec());
  return out;
}

std::vector<int> ExtractConfig::StatesOf(const learners::ModelConfig& model) const {
  std::vector<int> states = layers;
  if (states.empty())
    for (int l = 0; l <= model.layers; ++l)
      states.push_back(l);
  std::sort(states.begin(), states.end());
  return states;
}

// The learner's run gives weights after 0..n-1 examples; a zero example appended (x = 0, y = 0)
// gives the weights after all n without changing the earlier ones.
arma::cube LearnerWeights(const data::PromptSet& set, const std::string& spec) {
  const auto learner = learners::MakeLearner(spec, set.task);
  const int d = set.task.d, n = set.task.n;
  arma::cube out(d, n, set.size());
  arma::mat x(d, n + 1, arma::fill::zeros);
  arma::vec y(n + 1, arma::fill::zeros);
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    x.cols(0, n - 1) = set.x.slice(i);
    y.head(n) = set.y.col(i);
    learner->Run(x, y, run);
    out.slice(i) = run.weights.cols(1, n);
    // An iteration outside its convergence region (newton:K:C with C lambda_max(X'X + lambda I)
    // >= 2, gd:ALPHA:K with 2 ALPHA lambda_max(X'X) >= 2) overflows; nothing in the file's
    // schema lets a target be undefined, so the spec is refused rather than stored.
    if (!out.slice(i).is_finite())
      throw core::InputError(
          "extract", "learner_targets",
          fmt::format("{}: the learner's weights are NaN or infinite on prompt {} (its iteration "
                      "diverges there: newton:K:C needs C < 2 / lambda_max(X'X + lambda I), "
                      "gd:ALPHA:K needs ALPHA < 1 / lambda_max(X'X)); choose a smaller step or "
                      "start",
                      spec, set.first_index + i));
  }
  return out;
}

}  // namespace icl::extract
