// The probing request: the names of probe families and positions, the request's JSON record
// and its validation.
#include <fmt/format.h>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/spec.hpp"
#include "probes/data_access.hpp"
#include "probes/runner.hpp"
#include "probes/uncertainty.hpp"

namespace icl::probes {

namespace fs = std::filesystem;

std::string FamilyName(Family f) {
  switch (f) {
    case Family::kRidge:
      return "ridge";
    case Family::kLinear:
      return "linear";
    case Family::kMlp:
      return "mlp";
  }
  return "?";
}

Family ParseFamily(const std::string& name) {
  for (const Family f : {Family::kRidge, Family::kLinear, Family::kMlp})
    if (FamilyName(f) == name) return f;
  throw core::InputError("probe", "probes",
                         "unknown probe '" + name.substr(0, 40) + "'; expected ridge, linear, mlp");
}

std::vector<Family> ParseFamilies(const std::vector<std::string>& names) {
  if (names.empty()) throw core::InputError("probe", "probes", "name at least one family");
  std::vector<Family> out;
  for (const std::string& name : names)
    out.push_back(ParseFamily(name));
  return out;
}

std::string QueryTargetName(const std::string& target) {
  return target + kQuerySuffix;
}

std::pair<std::string, ProbeAt> SplitTargetName(const std::string& stored) {
  const std::string suffix = kQuerySuffix;
  if (stored.size() > suffix.size() &&
      stored.compare(stored.size() - suffix.size(), suffix.size(), suffix) == 0)
    return {stored.substr(0, stored.size() - suffix.size()), ProbeAt::kQuery};
  return {stored, ProbeAt::kState};
}

std::vector<ProbeAt> ParseProbeAt(const std::string& name) {
  if (name == "state") return {ProbeAt::kState};
  if (name == "query") return {ProbeAt::kQuery};
  if (name == "both") return {ProbeAt::kState, ProbeAt::kQuery};
  throw core::InputError("probe", "at",
                         "expected state, query or both, got '" + name.substr(0, 80) + "'");
}

bool ParsePooling(const std::string& name) {
  if (name == "attention" || name == "position") return name == "attention";
  throw core::InputError("probe", "pooling",
                         "expected attention or position, got '" + name.substr(0, 80) + "'");
}

arma::vec ParseLambdaGrid(const std::string& text) {
  const auto fail = [&](const std::string& what) -> void {
    throw core::InputError("probe", "lambdas", what + ", got '" + text.substr(0, 200) + "'");
  };
  const auto number = [&](const std::string& s) {
    const double v = core::ParseNumber(s).value_or(-1);
    if (v < 0) fail("expected LO:HI:COUNT (log-spaced) or a comma list of numbers >= 0");
    return v;
  };
  if (text.find(':') != std::string::npos) {
    const core::Spec spec = core::ParseSpec(text);
    if (spec.args.size() != 2)
      fail("expected LO:HI:COUNT (log-spaced) or a comma list of numbers >= 0");
    const double lo = number(spec.name), hi = number(spec.args[0]), count = number(spec.args[1]);
    if (!(lo > 0) || !(hi >= lo) || count < 1 || count > 1000 || count != std::floor(count))
      fail("in LO:HI:COUNT, need 0 < LO <= HI and a whole COUNT in 1..1000");
    if (count == 1) return arma::vec{lo};
    return arma::logspace(std::log10(lo), std::log10(hi), static_cast<arma::uword>(count));
  }
  std::vector<double> v;
  for (const std::string& item : core::SplitList("probe", "lambdas", text))
    v.push_back(number(item));
  if (v.size() > 1000) fail("more than 1000 values");
  return arma::vec(v);
}

std::array<double, 3> SplitFractions(const std::vector<double>& fractions) {
  if (fractions.size() != 3)
    throw core::InputError("probe", "split",
                           "expected three fractions TRAIN,VAL,TEST (like 0.8,0.1,0.1), got " +
                               std::to_string(fractions.size()));
  return {fractions[0], fractions[1], fractions[2]};
}

int ProbePosition(const StatesInfo& info, int k, ProbeAt at) {
  if (at == ProbeAt::kState) return AfterKPosition(info, k);
  if (info.positions != extract::Positions::kAll || k >= info.n)
    throw std::logic_error("probe: a query position that PlanProbes should have refused");
  return 2 * k;  // x-token of example k+1: x_1 y_1 ... x_k y_k x_{k+1}
}

std::string SourceName(const std::string& path) {
  return fs::path(path).stem().string();
}

std::string ProbeRequest::ToJson() const {
  std::vector<std::string> fam;
  for (auto f : families)
    fam.push_back(FamilyName(f));
  std::vector<std::string> at_names;
  for (auto a : at)
    at_names.push_back(a == ProbeAt::kState ? "state" : "query");
  nlohmann::json j = {
      {"activations", activations},
      {"controls", controls},
      {"targets", targets},
      {"probes", fam},
      {"seeds", seeds},
      {"shuffle_control", shuffle_control},
      {"lambdas", std::vector<double>(lambdas.begin(), lambdas.end())},
      {"lambda_selection", "exact leave-one-out on the training split"},
      {"split", split},
      {"seed", seed},
      {"pooling", pooled ? "attention" : "position"},
      {"at", at_names},
      {"mlp_hidden", gradient.mlp_hidden},
      {"mlp_gelu", "tanh approximation, fused float32 kernel (learners/gelu.hpp)"},
      {"lr", gradient.lr},
      {"batch", gradient.batch},
      {"max_epochs", gradient.max_epochs},
      {"patience", gradient.patience},
      {"layers", layers},
      {"ks", ks},
      {"codelength", codelength ? nlohmann::json{{"fractions", codelength_fractions},
                                                 {"precision", codelength_precision},
                                                 {"code",
                                                  "online (prequential): block 0 by "
                                                  "N(mean, variance) of block 0, block "
                                                  "i by the Bayesian ridge predictive "
                                                  "fitted on blocks 0..i-1"}}
                                : nlohmann::json()},
      {"standardize", "features by training mean/std; ridge intercept unpenalised"},
      {"bootstrap",
       {{"replicates", bootstrap},
        {"seed", seed},
        {"level", kConfidence},
        {"interval", "percentile, over the test prompts of each seed's split"}}}};
  return j.dump();
}

void ProbeRequest::Validate() const {
  auto fail = [](const std::string& field, const std::string& text) {
    throw core::InputError("probe", field, text);
  };
  if (activations.empty()) fail("activations", "required (a file from extract)");
  if (seeds < 1) fail("seeds", "must be at least 1");
  if (bootstrap < 100 || bootstrap > 100000)
    fail("bootstrap", "must be 100..100000 replicates, got " + std::to_string(bootstrap));
  if (max_prompts < 0) fail("max_prompts", "must be 0 (all) or a positive count");
  if (targets.empty()) fail("targets", "at least one target is needed");
  for (const auto& t : targets)
    if (!core::IsPlainName(t)) fail("targets", "'" + t.substr(0, 80) + "' is not a plain name");
  if (families.empty()) fail("probes", "at least one probe family is needed");
  if (at.empty() || at.size() > 2 || (at.size() == 2 && at[0] == at[1]))
    fail("at", "expected state, query or both");
  for (const auto& t : targets)
    if (SplitTargetName(t).second == ProbeAt::kQuery)
      fail("targets", "'" + t.substr(0, 80) + "' ends in '" + kQuerySuffix +
                          "', the suffix of a target probed at the query; name the target and "
                          "pass {at} query");
  if (lambdas.is_empty() || !lambdas.is_finite() || lambdas.min() < 0)
    fail("lambdas", "must be finite non-negative penalties");
  double sum = 0;
  for (double f : split) {
    if (!(f >= 0 && f <= 1)) fail("split", "each fraction must be in [0, 1]");
    sum += f;
  }
  if (std::abs(sum - 1) > 1e-9) fail("split", "the fractions must sum to 1");
  if (block_rows < 1) fail("block_rows", "must be positive");
  if (ridge_keep_bytes < 0) fail("ridge_keep_bytes", "must be >= 0");
  if (!codelength && codelength_fractions != DefaultCodelengthFractions())
    fail("codelength_blocks", "only with {codelength}: the blocks are the codelength's");
  if (codelength) {
    CodelengthBlockEnds(codelength_fractions, 1 << 30);  // order and range (sizes: PlanProbes)
    if (!(lambdas.max() > 0))
      fail("lambdas",
           "the codelength chooses its penalty by the evidence, which needs a "
           "penalty > 0 in the grid");
    if (!(codelength_precision > 0 && codelength_precision <= 1))
      fail("codelength", "the precision must be in (0, 1]");
  }
  auto positive = [&](const std::string& field, double v) {
    if (!(v > 0) || !std::isfinite(v))
      fail(field, "must be a positive finite number, got " + fmt::format("{}", v));
  };
  positive("mlp_hidden", gradient.mlp_hidden);
  if (gradient.mlp_hidden > kMaxMlpHidden)
    fail("mlp_hidden", fmt::format("at most {} units (the MLP probe's width), got {}",
                                   kMaxMlpHidden, gradient.mlp_hidden));
  positive("lr", gradient.lr);
  positive("epochs", gradient.max_epochs);
  positive("patience", gradient.patience);
  positive("batch", gradient.batch);
}

}  // namespace icl::probes
