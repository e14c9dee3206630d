// The descriptions of the sources a probing run reads: activations files and arrays in memory.
#include "probes/source.hpp"

#include <algorithm>
#include <string>

#include "core/errors.hpp"
#include "data/task.hpp"
#include "learners/model_config.hpp"
#include "probes/runner.hpp"

namespace icl::probes {

StatesInfo DescribeActivations(extract::ActivationsInfo info) {
  StatesInfo s;
  s.name = info.path;
  s.prompts = info.prompts;
  s.layers = info.layers;
  s.hidden = info.model.hidden;
  s.model_layers = info.model.layers;
  s.n = info.task.n;
  s.d = info.task.d;
  s.seed = info.seed;
  s.positions = info.positions;
  s.positions_per_prompt = info.positions_per_prompt;
  s.targets = info.targets;
  s.target_per_k = info.target_per_k;
  s.file = std::move(info);
  return s;
}

extract::Positions InferPositions(int positions_per_prompt, int target_k) {
  if (target_k == 0 || target_k == positions_per_prompt) return extract::Positions::kY;
  if (2 * target_k == positions_per_prompt) return extract::Positions::kAll;
  throw core::InputError("probe", "targets",
                         "their K = " + std::to_string(target_k) +
                             " matches neither the T = " + std::to_string(positions_per_prompt) +
                             " states (positions y) nor T / 2 (positions all)");
}

StatesInfo DescribeArrays(const std::string& name, std::int64_t prompts, std::vector<int> layers,
                          int positions_per_prompt, int hidden, extract::Positions positions,
                          const std::vector<std::pair<std::string, int>>& targets) {
  if (prompts < 1 || positions_per_prompt < 1 || hidden < 1 || layers.empty())
    throw core::InputError("probe", "hidden",
                           "has an empty dimension (" + std::to_string(prompts) + " prompts, " +
                               std::to_string(layers.size()) + " layers, " +
                               std::to_string(positions_per_prompt) + " positions, " +
                               std::to_string(hidden) + " features)");
  for (int l : layers)
    if (l < 0 || l > learners::kMaxLayers)
      throw core::InputError("probe", "layers",
                             "labels must be in 0.." + std::to_string(learners::kMaxLayers) +
                                 ", got " + std::to_string(l));
  if (positions == extract::Positions::kAll && positions_per_prompt % 2 != 0)
    throw core::InputError("probe", "hidden",
                           "positions all: expected 2n tokens (x_1 y_1 ... x_n y_n) per prompt, "
                           "got " +
                               std::to_string(positions_per_prompt));
  if (targets.empty()) throw core::InputError("probe", "targets", "at least one is needed");
  StatesInfo s;
  s.name = name;
  s.prompts = prompts;
  s.hidden = hidden;
  // The labels name the states; the learner has at least as many blocks as the highest.
  s.model_layers =
      std::max(int(layers.size()) - 1, *std::max_element(layers.begin(), layers.end()));
  s.layers = std::move(layers);
  s.positions = positions;
  s.positions_per_prompt = positions_per_prompt;
  s.n = positions == extract::Positions::kAll ? positions_per_prompt / 2 : positions_per_prompt;
  s.d = targets.front().second;
  for (const auto& [target, entries] : targets) {
    if (entries < 1) throw core::InputError("probe", "targets", "'" + target + "' has no entries");
    s.targets.push_back(target);
    s.target_per_k.push_back(true);
  }
  return s;
}

void RelabelKs(const std::vector<int>& labels, ProbeRequest& request, ProbeOutput& out,
               StatesInfo& info) {
  const auto label = [&](int k) { return labels.at(std::size_t(k - 1)); };
  for (auto& r : out.records)
    r.k = label(r.k);
  for (auto& r : out.ridge)
    r.k = label(r.k);
  for (auto& a : out.alphas)
    a.k = label(a.k);
  for (auto& c : out.codes)
    c.k = label(c.k);
  for (auto& k : out.ks)
    k = label(k);
  for (auto& k : request.ks)
    k = label(k);
  info.n = std::max(info.n, *std::max_element(labels.begin(), labels.end()));
}

}  // namespace icl::probes
