// The swaps file's schema (schemas.hpp): iclprobe swap's whole-context
// counterfactuals.
#include "formats/schemas.hpp"

#include <string>

namespace icl::formats {

namespace {

Schema MakeSwapsSchema() {
  Schema s;
  s.format = kSwapsFormat;
  s.title = "Whole-context counterfactuals (`iclprobe swap`).";
  s.description =
      "Prompt A's query runs on prompt B's context state at each layer; the change of the "
      "prediction (the model's change) is compared with each reference's change on the prompt that "
      "counterfactual stands for (B's first k examples, then A's query). The first reference is "
      "the model itself on that prompt.";
  s.owner = "`intervene/swap.cpp` through the formats layer (`formats/`)";
  s.sizes = {{"reference", "the entries of attribute 'references' ('model' first)"},
             {"layer", "the entries of attribute 'layers'"},
             {"k", "the entries of attribute 'ks'"},
             {"pair", "attribute 'pairs'"}};
  using T = AttrType;
  s.attrs = {
      Attr("checkpoint", T::kString, "the checkpoint's path"),
      Attr("checkpoint_sha256", T::kString, "SHA-256 of the checkpoint file"),
      Attr("seed", T::kInt, "the prompt stream of the pairs"),
      Attr("pairs", T::kInt, "prompt pairs (2..1000000)"),
      Attr("bootstrap_replicates", T::kInt, "replicates of the bootstrap over pairs"),
      Attr("task_config", T::kString, "the task (JSON)"),
      Attr("layers", T::kIntList, "the states swapped"),
      Attr("ks", T::kIntList, "the prefix lengths"),
      Attr("references", T::kStringList, "'model', then the learners' specs"),
      Attr("pairs_rule", T::kString, "how pairs are formed", "",
           "pair p: A = prompt 2p, B = prompt 2p+1 of the stream 'seed' of task_config; A's states "
           "at positions 0..2k-1 (its first k examples) at the layer are replaced by B's, and the "
           "prediction at A's x_(k+1) is read"),
      Attr("reproduced_rule", T::kString, "how the summaries are computed", "",
           "1 - sum (dm - da)^2 / sum (da - mean da)^2 over pairs, dm the model's change, da the "
           "reference's change on (B's first k examples, A's x_(k+1)); slope sum dm da / sum da^2; "
           "pooled: sums over pairs and k; 95% percentile bootstrap over pairs"),
  };
  for (const char* name : {"reproduced", "reproduced_lo", "reproduced_hi", "slope", "slope_lo",
                           "slope_hi", "correlation"})
    s.datasets.push_back(SummaryData(name, {"reference", "layer", "k"}, {"reference", "layer", "k"},
                                     std::string(name) + " per (reference, layer, k)"));
  for (const char* name : {"pooled_reproduced", "pooled_reproduced_lo", "pooled_reproduced_hi",
                           "pooled_slope", "pooled_slope_lo", "pooled_slope_hi"})
    s.datasets.push_back(
        SummaryData(name, {"reference", "layer"}, {"reference", "layer"},
                    std::string(name).substr(7) + " pooled over the k of the run"));
  s.datasets.push_back(
      Data("model_change", {"layer", "k", "pair"}, {"layer", "k", "pair"},
           "the model's change at A's x_(k+1)", Values::kFinite,
           {{"description", "[layer, k, pair] the model's change at A's x_(k+1)"}}));
  s.datasets.push_back(
      Data("reference_change", {"reference", "k", "pair"}, {"reference", "k", "pair"},
           "the reference's change on the counterfactual prompt", Values::kFinite,
           {{"description",
             "[reference, k, pair] the reference's change on the counterfactual prompt"}}));
  return s;
}

}  // namespace

const Schema& SwapsSchema() {
  static const Schema s = MakeSwapsSchema();
  return s;
}

}  // namespace icl::formats
