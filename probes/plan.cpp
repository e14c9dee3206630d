// A probing request checked against its sources (files or arrays in memory) before any work.
#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "probes/data_access.hpp"
#include "probes/runner.hpp"

namespace icl::probes {

namespace {

// Control i against the main file: the same shapes and the very same prompts, and a plain
// source name that none of `names` has.
void CheckControl(const ProbePlan& plan, std::size_t i, std::set<std::string>& names) {
  const ProbeRequest& r = plan.request;
  const auto& main = plan.infos[0];
  const auto& c = plan.infos[i];
  auto mismatch = [&](const std::string& what, const std::string& a, const std::string& b) {
    throw core::InputError("probe", "control",
                           "'" + c.name + "' has " + what + " " + b + " but '" + main.name +
                               "' has " + a + "; controls must match the main file's shapes");
  };
  if (c.hidden != main.hidden)
    mismatch("hidden", std::to_string(main.hidden), std::to_string(c.hidden));
  if (c.model_layers != main.model_layers)
    mismatch("layers", std::to_string(main.model_layers), std::to_string(c.model_layers));
  if (c.d != main.d) mismatch("d", std::to_string(main.d), std::to_string(c.d));
  if (c.n != main.n) mismatch("n", std::to_string(main.n), std::to_string(c.n));
  if (c.positions != main.positions) mismatch("positions", "another layout", "its layout");
  // Model and control are compared prompt by prompt (paired intervals): the same prompts.
  if (c.seed != main.seed)
    throw core::InputError("probe", "control",
                           "'" + c.name + "' was extracted on prompts of seed " +
                               std::to_string(c.seed) + " but '" + main.name + "' on seed " +
                               std::to_string(main.seed) +
                               "; extract the control with the main file's prompt seed");
  if (c.prompts != main.prompts && (r.max_prompts <= 0 || c.prompts < r.max_prompts))
    throw core::InputError(
        "probe", "control",
        "'" + c.name + "' has " + std::to_string(c.prompts) + " prompts but '" + main.name +
            "' has " + std::to_string(main.prompts) +
            "; controls must hold the same prompts (or pass {max-prompts} at most the smaller)");
  // The paired intervals need the very same prompts, which the prompts themselves vouch for:
  // a seed attribute can be edited without changing any digest.
  const std::int64_t paired =
      std::min(c.prompts, r.max_prompts > 0 ? std::min<std::int64_t>(r.max_prompts, main.prompts)
                                            : main.prompts);
  if (plan.memory.empty() &&
      extract::PromptsDigest(c.name, paired) != extract::PromptsDigest(main.name, paired))
    throw core::InputError("probe", "control",
                           "'" + c.name + "' holds other prompts than '" + main.name +
                               "' (their /prompts differ among the first " +
                               std::to_string(paired) +
                               "); extract the control with the main file's task, seed and "
                               "prompt count");
  if (!core::IsPlainName(SourceName(c.name)))
    throw core::InputError("probe", "control",
                           "the file name of '" + c.name +
                               "' names its source in the outputs and must be plain (letters, "
                               "digits, _ . -, at most 64); rename the file");
  if (!names.insert(SourceName(c.name)).second)
    throw core::InputError("probe", "control",
                           "two sources are named '" + SourceName(c.name) + "'; rename a file");
}

// The checks of a plan against its sources' descriptions, and the defaults they resolve.
void CheckPlan(ProbePlan& plan) {
  ProbeRequest& r = plan.request;
  std::vector<StatesInfo>& infos = plan.infos;
  const auto& main = infos[0];
  std::set<std::string> names = {"model", "shuffled"};
  for (std::size_t i = 1; i < infos.size(); ++i)
    CheckControl(plan, i, names);
  if (r.max_prompts > 0) {
    if (r.max_prompts > main.prompts)
      throw core::InputError("probe", "max_prompts",
                             std::to_string(r.max_prompts) + " is more than the " +
                                 std::to_string(main.prompts) + " prompts of '" + main.name + "'");
    // Every file is probed on its first max_prompts prompts (prompt i depends only on the seed
    // and i, so these are the same prompts in every file).
    for (auto& info : infos) {
      info.prompts = r.max_prompts;
      if (info.file) info.file->prompts = r.max_prompts;  // what its readers read
    }
  }
  for (const auto& info : infos)
    for (const auto& t : r.targets)
      if (std::find(info.targets.begin(), info.targets.end(), t) == info.targets.end()) {
        std::string have;
        for (const auto& x : info.targets)
          have += (have.empty() ? "" : ", ") + x;
        throw core::InputError("probe", "targets",
                               "'" + t + "' is not in '" + info.name + "' (it has " + have + ")");
      }
  if (r.layers.empty()) r.layers = main.layers;
  for (const auto& info : infos)
    for (int l : r.layers)
      if (std::find(info.layers.begin(), info.layers.end(), l) == info.layers.end())
        throw core::InputError(
            "probe", "layers",
            "layer " + std::to_string(l) + " is not stored in '" + info.name + "'");
  const bool query = std::find(r.at.begin(), r.at.end(), ProbeAt::kQuery) != r.at.end();
  if (query && main.positions != extract::Positions::kAll)
    throw core::InputError("probe", "at",
                           "query reads the x-token of example k+1, but '" + main.name +
                               "' was extracted with positions y (y-tokens only); extract it "
                               "again with positions all");
  // The query after k examples is the x-token of example k+1: none after the last example.
  const int k_max = query ? main.n - 1 : main.n;
  if (r.ks.empty())
    for (int k = 1; k <= k_max; ++k)
      r.ks.push_back(k);
  for (int k : r.ks) {
    if (query && k == main.n)
      throw core::InputError("probe", "k",
                             "k=" + std::to_string(k) + " = n has no query token (no example " +
                                 std::to_string(k + 1) + "); with {at} query use k < n");
    if (k < 1 || k > main.n)
      throw core::InputError("probe", "k",
                             std::to_string(k) + " is outside 1.." + std::to_string(main.n));
  }
  for (const auto& info : infos) {
    const auto roles = SplitPrompts(info.prompts, r.split, r.seed);  // throws on an empty part
    const auto n_train = RoleIndices(roles, Role::kTrain).n_elem;
    if (r.codelength) CodelengthBlockEnds(r.codelength_fractions, std::int64_t(n_train));
    if (r.lambdas.min() == 0 &&
        std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end() &&
        n_train <= arma::uword(info.hidden))
      throw core::InputError("probe", "lambdas",
                             "0 is in the grid but '" + info.name + "' has " +
                                 std::to_string(n_train) + " training prompts for " +
                                 std::to_string(info.hidden) +
                                 " features; use lambdas > 0 or more prompts");
  }
}

}  // namespace

ProbePlan PlanProbes(const ProbeRequest& request) {
  request.Validate();
  ProbePlan plan;
  plan.request = request;
  plan.infos.push_back(DescribeActivations(extract::ReadActivationsInfo(request.activations)));
  for (const auto& c : request.controls)
    plan.infos.push_back(DescribeActivations(extract::ReadActivationsInfo(c)));
  CheckPlan(plan);
  return plan;
}

ProbePlan PlanProbesInMemory(const ProbeRequest& request, std::vector<StatesInfo> infos,
                             std::vector<std::shared_ptr<const MemorySource>> memory) {
  request.Validate();
  if (infos.empty() || infos.size() != memory.size() || infos.size() != request.controls.size() + 1)
    throw std::logic_error("probe: one description and one memory source per source");
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto& info = infos[i];
    const MemorySource* m = memory[i].get();
    if (!m) throw std::logic_error("probe: a memory source is missing");
    for (int l : info.layers) {
      const auto it = m->hidden.find(l);
      if (it == m->hidden.end() || !it->second.data ||
          it->second.stride < std::int64_t(info.positions_per_prompt) * info.hidden)
        throw std::logic_error("probe: memory source '" + info.name + "' lacks layer " +
                               std::to_string(l) + " in the described shape");
    }
    for (const auto& t : info.targets) {
      const auto it = m->targets.find(t);
      if (it == m->targets.end() || int(it->second.values.size()) != info.n)
        throw std::logic_error("probe: memory source '" + info.name + "' lacks target " + t);
      for (const auto& v : it->second.values)
        if (v.n_rows != it->second.dims || std::int64_t(v.n_cols) < info.prompts)
          throw std::logic_error("probe: memory target " + t + " of the wrong shape");
    }
  }
  ProbePlan plan;
  plan.request = request;
  plan.infos = std::move(infos);
  plan.memory = std::move(memory);
  CheckPlan(plan);
  return plan;
}

arma::fmat MemorySource::Read(int layer, std::int64_t rows, std::int64_t start,
                              std::int64_t count) const {
  const Layer& l = hidden.at(layer);
  arma::fmat out(rows, count, arma::fill::none);
  for (std::int64_t j = 0; j < count; ++j)
    std::memcpy(out.colptr(j), l.data + (start + j) * l.stride, sizeof(float) * rows);
  return out;
}

}  // namespace icl::probes
