// The DAS file's schema (schemas.hpp): iclprobe das's distributed alignment
// search.
#include "formats/schemas.hpp"

#include <string>

namespace icl::formats {

namespace {

Schema MakeDasSchema() {
  Schema s;
  s.format = kDasFormat;
  s.title = "Distributed alignment search (`iclprobe das`).";
  s.description =
      "A learned orthogonal subspace of m dimensions of each layer's state, scored by "
      "interchange-intervention accuracy (IIA): A's state at the positions becomes h_A + U U' (h_B "
      "- h_A), against a random subspace of the same m, no interchange, the whole state, and named "
      "subspaces interchanged as given.";
  s.owner = "`intervene/das_file.cpp` through the formats layer (`formats/`)";
  s.sizes = {{"layer", "the entries of attribute 'layers'"},
             {"m", "the entries of attribute 'ms' (in a basis's path and shape: that m)"},
             {"k", "the entries of attribute 'ks'"},
             {"subspace", "the entries of attribute 'subspaces' ('probe' first)"},
             {"H", "the width of the residual stream"}};
  using T = AttrType;
  s.attrs = {
      Attr("checkpoint", T::kString, "the checkpoint's path"),
      Attr("checkpoint_sha256", T::kString, "SHA-256 of the checkpoint file"),
      Attr("quantity", T::kString, "the counterfactual quantity (xty or w)"),
      Attr("algorithm", T::kString, "the algorithm whose counterfactual is the target"),
      Attr("position", T::kString, "the interchanged positions"),
      Attr("start", T::kString, "the basis the search starts from (probe or random)"),
      Attr("seed", T::kInt, "the prompt stream (held-out pairs: seed + 1)"),
      Attr("train_pairs", T::kInt, "pairs the basis is learned on"),
      Attr("test_pairs", T::kInt, "held-out pairs"),
      Attr("max_epochs", T::kInt, "the most epochs of the search"),
      Attr("tolerance", T::kDouble, "the search stops when the loss improves by less"),
      Attr("learning_rate", T::kDouble, "Adam's learning rate"),
      Attr("batch", T::kInt, "pairs per step"),
      Attr("bootstrap_replicates", T::kInt, "replicates of the bootstrap over pairs"),
      Attr("task_config", T::kString, "the task (JSON)"),
      Attr("layers", T::kIntList, "the states searched"),
      Attr("ms", T::kIntList, "the subspace sizes"),
      Attr("ks", T::kIntList, "the prefix lengths"),
      Attr("subspaces", T::kStringList, "the named subspaces ('probe' first)"),
      Attr("rule", T::kString, "the interchange, the search and the scores", "",
           "A's state at the positions becomes h_A + U U' (h_B - h_A), U the learned H x m basis "
           "(R = exp(S - S') R0, its first m columns; Adam on the mean of (o - t)^2 / var_k t); "
           "IIA = 1 - sum (o - t)^2 / sum (t - mean_k t)^2 over held-out pairs (stream seed + 1) "
           "and k, 95% percentile bootstrap over pairs; random: a random U of the same m; none: no "
           "interchange; full: the whole state at the positions; angles in degrees"),
  };
  const std::vector<std::string> lm = {"layer", "m"}, l = {"layer"};
  for (const char* name :
       {"iia", "iia_lo", "iia_hi", "random_iia", "random_iia_lo", "random_iia_hi", "epochs"})
    s.datasets.push_back(SummaryData(name, lm, lm, std::string(name) + ", pooled over k"));
  for (const char* name : {"none_iia", "none_iia_lo", "none_iia_hi", "full_iia", "full_iia_lo",
                           "full_iia_hi", "probe_r2"})
    s.datasets.push_back(SummaryData(name, l, l, std::string(name) + " per layer"));
  for (const char* name : {"iia_k", "random_iia_k"})
    s.datasets.push_back(SummaryData(name, {"layer", "m", "k"}, {"layer", "m", "k"},
                                     std::string(name) + ": IIA per k"));
  for (const char* name : {"angle_min", "angle_max"})
    s.datasets.push_back(SummaryData(name, {"layer", "m", "subspace"}, {"layer", "m", "subspace"},
                                     "principal angles (degrees) to each named subspace"));
  for (const char* name : {"subspace_iia", "subspace_iia_lo", "subspace_iia_hi"})
    s.datasets.push_back(SummaryData(name, {"layer", "subspace"}, {"layer", "subspace"},
                                     "IIA of each named subspace interchanged as given"));
  for (const char* name : {"ceiling_iia", "ceiling_iia_lo", "ceiling_iia_hi"})
    s.datasets.push_back(SummaryData(name, {"1"}, {},
                                     "the model itself on B's first k examples and A's query",
                                     "quantity w only"));
  s.datasets.push_back(Data("bases/state_<layer>_m_<m>", {"m", "H"}, {"basis_vector", "hidden"},
                            "the learned basis of one (layer, m); row i: basis vector i"));
  return s;
}

}  // namespace

const Schema& DasSchema() {
  static const Schema s = MakeDasSchema();
  return s;
}

}  // namespace icl::formats
