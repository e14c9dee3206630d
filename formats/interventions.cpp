// The interventions file's schema (schemas.hpp): iclprobe intervene's results.
#include "formats/schemas.hpp"

namespace icl::formats {

namespace {

Schema MakeInterventionsSchema() {
  Schema s;
  s.format = kInterventionsFormat;
  s.title = "Interchange interventions along probe directions (`iclprobe intervene`).";
  s.description =
      "Prompt A's state after k examples is edited so that the ridge probe reads prompt B's value; "
      "the change of the model's prediction at A's query (observed) is compared with the change "
      "the algorithm predicts (predicted), per control (the probe's edit, and an edit of the same "
      "norm in a random direction).";
  s.owner = "`intervene/intervene_file.cpp` through the formats layer (`formats/`)";
  s.sizes = {{"control", "the entries of attribute 'controls' (probe, random)"},
             {"layer", "the entries of attribute 'layers'"},
             {"k", "the entries of attribute 'ks'"},
             {"pair", "attribute 'pairs'"},
             {"H", "the width of the residual stream"},
             {"r", "the rank of the subspace of attribute 'within'"}};
  using T = AttrType;
  s.attrs = {
      Attr("checkpoint", T::kString, "the checkpoint's path"),
      Attr("checkpoint_sha256", T::kString, "SHA-256 of the checkpoint file"),
      Attr("probes", T::kString, "the probes file's path"),
      Attr("probes_digest", T::kString, "the probes file's digest"),
      Attr("target", T::kString, "the probed quantity (w_ols, w_ridge, w, xty, w_<spec>)"),
      Attr("target_learner", T::kString, "the learner spec whose weights are the target",
           "a learner target"),
      Attr("response", T::kString, "the algorithm's response (weights, gd:ALPHA, ridge:L, ols)"),
      Attr("span", T::kString, "probed or through-query"),
      Attr("metric", T::kString, "covariance or standardized"),
      Attr("calibration_prompts", T::kInt, "prompts of the covariance metric"),
      Attr("within", T::kString,
           "\"\" = the probes file's ridge probes; else the subspace the probe was fitted within "
           "(basis in /within) and probe_r2 is that probe's, on the calibration prompts",
           "older files lack it"),
      Attr("seed", T::kInt, "the prompt stream of the pairs"),
      Attr("pairs", T::kInt, "prompt pairs (2..1000000)"),
      Attr("bootstrap_replicates", T::kInt, "replicates of the bootstrap over pairs"),
      Attr("task_config", T::kString, "the task (JSON)"),
      Attr("layers", T::kIntList, "the states edited"),
      Attr("ks", T::kIntList, "the prefix lengths"),
      Attr("controls", T::kStringList, "probe, random"),
      Attr("pairs_rule", T::kString, "how pairs are formed", "",
           "pair p: A = prompt 2p, B = prompt 2p+1 of the stream 'seed' of task_config; A's state "
           "after k examples is edited so that the ridge probe reads B's value, and the prediction "
           "at A's x_{k+1} is compared"),
      Attr("slope_rule", T::kString, "how the slopes are computed", "",
           "observed on predicted through the origin, sum(o p) / sum(p^2); 95% percentile "
           "bootstrap over pairs"),
  };
  const std::vector<std::string> clk = {"control", "layer", "k"}, lkp = {"layer", "k", "pair"};
  for (const char* name : {"slope", "slope_lo", "slope_hi", "correlation"})
    s.datasets.push_back(Data(name, clk, clk,
                              std::string(name) + " of observed on predicted per control",
                              Values::kFinite, {{"description", "[control, layer, k]"}}));
  s.datasets.push_back(Data("probe_r2", {"layer", "k"}, {"layer", "k"},
                            "the probe's test R2 (mean over probe seeds)"));
  for (const char* name : {"predicted", "edit_norm", "state_norm"})
    s.datasets.push_back(Data(name, lkp, lkp, std::string(name) + " per pair", Values::kFinite,
                              {{"description", "[layer, k, pair]"}}));
  s.datasets.push_back(
      Data("observed", {"control", "layer", "k", "pair"}, {"control", "layer", "k", "pair"},
           "the change of the model's prediction at A's query", Values::kFinite,
           {{"description", "[control, layer, k, pair] change of the prediction"}}));
  s.datasets.push_back(
      {"within",
       {"H", "r"},
       {"state", "basis"},
       "orthonormal basis of the subspace the probe was fitted in",
       Values::kFinite,
       {{"description", "[H, r] orthonormal basis of the subspace the probe was fitted in"}},
       "the probe was fitted within a subspace"});
  return s;
}

}  // namespace

const Schema& InterventionsSchema() {
  static const Schema s = MakeInterventionsSchema();
  return s;
}

}  // namespace icl::formats
