// The trace file's schema (schemas.hpp): iclprobe trace's per-layer predictions
// matched to algorithm iterates.
#include "formats/schemas.hpp"

#include <string>

namespace icl::formats {

namespace {

void AddInputs(Schema& s, const std::string& prefix, const std::string& whose) {
  using T = AttrType;
  s.attrs.push_back(Attr(prefix + "checkpoints", T::kStringList, whose + " checkpoints' paths"));
  s.attrs.push_back(
      Attr(prefix + "checkpoint_sha256", T::kStringList, "SHA-256 of each of " + whose));
  s.attrs.push_back(
      Attr(prefix + "activations", T::kStringList,
           "the activations file of each of " + whose + " (\"\" for a forward pass)"));
  s.attrs.push_back(Attr(prefix + "seeds", T::kIntList, "the training seed of each of " + whose));
}

void AddMatch(Schema& s) {
  const std::string group = "trace/<spec>/<side>";
  for (const char* name : {"spd", "spd_lo", "spd_hi", "cos", "cos_lo", "cos_hi"})
    s.datasets.push_back(Data(group + "/" + name, {"layer", "iterate"}, {"layer", "iterate"},
                              std::string(name) + ": similarity of each layer to each iterate",
                              Values::kAny));
  for (const char* name : {"best", "best_lo", "best_hi", "best_spd", "best_spd_lo", "best_spd_hi",
                           "margin", "margin_lo", "margin_hi"})
    s.datasets.push_back(Data(group + "/" + name, {"layer"}, {"layer"},
                              std::string(name) + ": the best iterate of each layer",
                              Values::kAny));
  for (const char* name : {"excess", "excess_lo", "excess_hi"}) {
    DatasetSpec d =
        Data(group + "/" + name, {"layer"}, {"layer"},
             std::string(name) + ": the learner's similarity beyond the control's", Values::kAny);
    d.when = "side learner, with controls";
    s.datasets.push_back(d);
  }
  for (const char* name :
       {"rate", "rate_lo", "rate_hi", "log2_rate", "log2_rate_lo", "log2_rate_hi"})
    s.attrs.push_back(
        AttrOn(group, name, AttrType::kDouble, "iterations (or doublings) per layer"));
  s.attrs.push_back(
      AttrOn(group, "rate_layers", AttrType::kInt, "the layers the rate is fitted over"));
}

Schema MakeTraceSchema() {
  Schema s;
  s.format = kTraceFormat;
  s.title = "Per-layer predictions matched to algorithm iterates (`iclprobe trace`).";
  s.description =
      "Each learner's per-layer predictions (a lens or ridge readout) are compared with every "
      "iterate of each algorithm: the similarity per (layer, iterate), the best iterate per layer, "
      "and the rate in iterations per layer. `<spec>` is each entry of attribute 'algorithms', "
      "`<side>` is learner, or control with controls.";
  s.owner = "`analysis/trace_file.cpp` through the formats layer (`formats/`)";
  s.sizes = {{"prompt", "attribute 'prompts'"},
             {"k", "the entries of attribute 'ks'"},
             {"lambda", "the ridge readout's penalties"},
             {"seed", "the entries of attribute 'checkpoints' (the learners)"},
             {"control", "the entries of attribute 'control_checkpoints'"},
             {"layer", "the entries of attribute 'layers'"},
             {"iterate", "the algorithm's steps + 1"}};
  using T = AttrType;
  s.attrs = {
      Attr("readout", T::kString, "lens or ridge"),
      Attr("task_config", T::kString, "the task (JSON)"),
      Attr("seed", T::kInt, "the prompts' seed"),
      Attr("prompts_from", T::kString, "\"\" or the activations file scored"),
      Attr("prompts", T::kInt, "prompts scored"),
      Attr("fit_prompts", T::kInt, "prompts the ridge readout is fitted on (0 for lens)"),
      Attr("bootstrap_replicates", T::kInt, "replicates of the two-stage bootstrap"),
      Attr("level", T::kDouble, "the intervals' level"),
      Attr("ks", T::kIntList, "the prefix lengths"),
      Attr("layers", T::kIntList, "the states read"),
      Attr("model_layers", T::kInt, "the learners' blocks"),
      Attr("algorithms", T::kStringList, "the algorithms' specs, each once"),
  };
  AddInputs(s, "", "the learners'");
  AddInputs(s, "control_", "the controls'");
  s.attrs.push_back(
      Attr("similarity_rule", T::kString, "the similarities and their intervals", "",
           "spd: 1 - sum (a - b)^2 / sum (a^2 + b^2 + 1e-6 y^2) over prompts and k, the mean over "
           "seeds; cos: the mean over prompts of the cosine over k of the residuals a - y and b - "
           "y; intervals: two-stage percentile bootstrap (seeds, then prompts)"));
  s.attrs.push_back(AttrOn("trace/<spec>", "spec", T::kString, "the algorithm's spec"));
  s.attrs.push_back(AttrOn("trace/<spec>", "family", T::kString, "the algorithm's family"));
  s.attrs.push_back(AttrOn("trace/<spec>", "steps", T::kInt, "the algorithm's steps"));
  s.datasets.push_back(
      Data("labels", {"prompt", "k"}, {"prompt", "k"}, "y_(k+1) of each prompt", Values::kAny));
  s.datasets.push_back(Data("readout_lambdas", {"lambda"}, {"lambda"},
                            "the ridge readout's grid of penalties", Values::kAny));
  s.datasets.push_back(Data("predictions", {"seed", "layer", "prompt", "k"},
                            {"seed", "layer", "prompt", "k"},
                            "each learner's per-layer predictions", Values::kAny));
  DatasetSpec controls = Data("control_predictions", {"control", "layer", "prompt", "k"},
                              {"control", "layer", "prompt", "k"},
                              "each control's per-layer predictions", Values::kAny);
  controls.when = "with controls";
  s.datasets.push_back(controls);
  AddMatch(s);
  return s;
}

}  // namespace

const Schema& TraceSchema() {
  static const Schema s = MakeTraceSchema();
  return s;
}

}  // namespace icl::formats
