// The probes file as a schema (probes_schema.hpp's ProbesSchema).
#include "probes/probes_schema.hpp"

#include <string>

#include "data/prompt_io.hpp"
#include "probes/probes_file.hpp"

namespace icl::probes::schema {

namespace {

using formats::AttrType;
using formats::Values;

formats::DatasetSpec Described(const std::string& path, std::vector<std::string> shape,
                               std::vector<std::string> labels, const std::string& description,
                               const char* fixed, const std::string& when, Values values) {
  formats::DatasetSpec d = formats::Data(path, shape, std::move(labels), description, values);
  if (fixed) d.attrs = {{"description", fixed}};
  d.when = when;
  return d;
}

void AddRootAttributes(formats::Schema& s) {
  formats::AttrSpec layout =
      formats::Attr("metric_layout", AttrType::kString, "where the scores are");
  layout.value = kMetricLayout;
  s.attrs = {
      formats::Attr("activations", AttrType::kString,
                    "the main activations file's path (the name of arrays probed in memory)"),
      formats::Attr("activations_digest", AttrType::kString,
                    "its content_sha256, or for a file without one its SHA-256 (\"\" in memory)"),
      formats::Attr("activations_digest_kind", AttrType::kString,
                    "content_sha256, file_sha256 or memory"),
      formats::Attr("activations_size", AttrType::kInt, "its size in bytes when recorded"),
      formats::Attr("activations_mtime_ns", AttrType::kInt, "its modification time when recorded"),
      formats::Attr("checkpoint_sha256", AttrType::kString,
                    "SHA-256 of the checkpoint the activations came from (\"\" in memory)"),
      formats::Attr("ridge_lambda", AttrType::kDouble, "the activations' w_ridge lambda",
                    "the activations record it"),
      formats::Attr("learner_targets", AttrType::kString,
                    "JSON object: each learner target's name and its learner's spec",
                    "the activations have learner targets"),
      formats::Attr("model_config", AttrType::kString, "the activations' model (JSON)"),
      formats::Attr("task_config", AttrType::kString, "the activations' task (JSON)"),
      formats::Attr("probe_config", AttrType::kString, "the probing request (JSON)"),
      formats::Attr("sources", AttrType::kStringList,
                    "model, then each control's name, then shuffled (the shuffle control)"),
      formats::Attr("controls", AttrType::kString,
                    "JSON object: each control's name and its path, digest, digest_kind, size, "
                    "mtime_ns"),
      formats::Attr("layers", AttrType::kIntList, "the states probed"),
      formats::Attr("ks", AttrType::kIntList, "the prefix lengths probed"),
      formats::Attr("seeds", AttrType::kInt, "the splits (seeds) of the prompts"),
      layout,
      formats::Attr("bootstrap_replicates", AttrType::kInt,
                    "replicates of the bootstrap of the intervals"),
      formats::Attr("bootstrap_seed", AttrType::kInt, "the bootstrap's seed"),
      formats::Attr("confidence", AttrType::kDouble, "the intervals' level"),
  };
  formats::AttrSpec code =
      formats::AttrOn("codelength", "description", AttrType::kString, "what the codelength is");
  code.value = kCodelengthDescription;
  s.attrs.push_back(formats::AttrOn("ridge", "lambdas", AttrType::kString,
                                    "JSON list: the penalties leave-one-out chooses from"));
  s.attrs.push_back(formats::AttrOn("codelength", "fractions", AttrType::kString,
                                    "JSON list: the fractions of the training rows that end "
                                    "each block"));
  s.attrs.push_back(formats::AttrOn("codelength", "precision", AttrType::kDouble,
                                    "each target entry to this fraction of its sd"));
  s.attrs.push_back(code);
  s.attrs.push_back(formats::AttrOn("target_maps/r2", "targets", AttrType::kStringList,
                                    "the targets, in the order of the axes from and to"));
}

void AddScores(formats::Schema& s) {
  const std::string cell = "<target>/<probe>/<source>";
  for (const char* m : kMetricNames)
    s.datasets.push_back(Described("metrics/" + cell + "/" + m, {"layer", "k", "seed"}, kCellLabels,
                                   std::string(m) + " on the seed's test prompts" +
                                       (std::string(m).find('_') == std::string::npos
                                            ? ""
                                            : ": a bound of the 95% bootstrap interval"),
                                   nullptr, "", Values::kFinite));
  s.datasets.push_back(Described("errors/" + cell + "/sse", {"layer", "k", "seed", "test_prompt"},
                                 {"layer", "k", "seed", "test_prompt"},
                                 "each test prompt's squared error", kSseDescription, "",
                                 Values::kFinite));
  s.datasets.push_back(Described("errors/<target>/sst", {"k", "seed", "test_prompt"},
                                 {"k", "seed", "test_prompt"},
                                 "each test prompt's squared distance from the test mean",
                                 kSstDescription, "", Values::kFinite));
  s.datasets.push_back(Described("selectivity/<target>/<probe>/<source>", {"layer", "k", "seed"},
                                 kCellLabels, "R2(model) - R2(source) for each source but model",
                                 nullptr, "with a control or the shuffle control",
                                 Values::kFinite));
  s.datasets.push_back(Described("splits/seed_<seed>", {"prompt"}, {"prompt"},
                                 "each prompt's role in the split of seed <seed> = 0..seeds-1",
                                 kSplitDescription, "", Values::kAny));
  s.datasets.back().element = "uint8";
}

void AddFits(formats::Schema& s) {
  const std::string ridge = "ridge/<target>/<source>/", when = "ridge probes";
  const std::vector<std::string> cell = kCellLabels;
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> out = cell;
    out.insert(out.end(), more.begin(), more.end());
    return out;
  };
  s.datasets.push_back(Described(ridge + "weights", with({"feature", "output"}),
                                 with({"feature", "output"}), "the fitted weights",
                                 kWeightsDescription, when, Values::kAny));
  s.datasets.push_back(Described(ridge + "intercept", with({"output"}), with({"output"}),
                                 "the fitted intercepts", nullptr, when, Values::kAny));
  s.datasets.push_back(
      Described(ridge + "lambda", cell, cell, "the penalty chosen", nullptr, when, Values::kAny));
  s.datasets.push_back(Described(ridge + "loo_mse", with({"lambda"}), with({"lambda"}),
                                 "the exact leave-one-out error of each penalty", nullptr, when,
                                 Values::kAny));
  s.datasets.push_back(Described(ridge + "feature_scale", with({"feature"}), with({"feature"}),
                                 "each input feature's training sd", kFeatureScaleDescription, when,
                                 Values::kAny));
  s.datasets.push_back(Described("alpha/<target>/<probe>/<source>", with({"position"}),
                                 with({"position"}), "the pooling weights of a gradient probe",
                                 kAlphaDescription, "linear or mlp probes with attention pooling",
                                 Values::kAny));
  const std::string code = "codelength/<target>/<probe>/<source>/", coded = "with codelength";
  s.datasets.push_back(Described(code + "bits", cell, cell, "the online codelength",
                                 kBitsDescription, coded, Values::kFinite));
  s.datasets.push_back(Described(code + "uniform_bits", cell, cell, "the reference codelength",
                                 kUniformBitsDescription, coded, Values::kFinite));
  s.datasets.push_back(Described(code + "block_bits", with({"block"}), with({"block"}),
                                 "each block's bits", nullptr, coded, Values::kAny));
  s.datasets.push_back(Described(code + "uniform_block_bits", with({"block"}), with({"block"}),
                                 "each block's bits by the reference code", nullptr, coded,
                                 Values::kAny));
  s.datasets.push_back(Described(code + "block_lambda", with({"block"}), with({"block"}),
                                 "each block's penalty", kBlockLambdaDescription, coded,
                                 Values::kAny));
  s.datasets.push_back(Described("codelength/block_ends", {"seed", "block"}, {"seed", "block"},
                                 "the training rows that end each block", kBlockEndsDescription,
                                 coded, Values::kAny));
  s.datasets.back().element = "int64";
  s.datasets.push_back(Described("target_maps/r2", {"k", "target", "target"}, {"k", "from", "to"},
                                 "test R2 of the affine map from one target to another",
                                 kTargetMapsDescription, "two or more targets",
                                 Values::kFiniteOrNaN));
  s.datasets.push_back(Described("ceilings/<target>", {"k", "seed"}, {"k", "seed"},
                                 "the most R2 any representation gives the target",
                                 kCeilingDescription,
                                 "target w (or w.query) on a Gaussian task whose w_ridge is the "
                                 "Bayes posterior mean",
                                 Values::kFinite));
}

formats::Schema Make() {
  formats::Schema s;
  s.format = kProbesFormat;
  s.version = data::kFormatVersion;
  s.title = "Probes of hidden states: scores, per-prompt errors and fits (`iclprobe probe`).";
  s.description =
      "Every probe of a target at a (layer, k) cell, per seed of the prompts' split, fitted on "
      "the training prompts and scored on the test prompts: the scores and their bootstrap "
      "intervals, each test prompt's squared error (which the intervals resample), the fitted "
      "ridge readouts, and optionally pooling weights, codelengths, maps between targets and the "
      "ceiling of w. `<target>` is each probed target (one read at the query is `<target>.query`), "
      "`<probe>` ridge, linear or mlp, `<source>` model, each control by its name, or shuffled. "
      "Written by `probes/probes_file_write.cpp` (`iclprobe probe`, `iclprobe.probe`) and read "
      "by `probes/probes_file.cpp` (`report`, `intervene`, `iclprobe.open`).";
  s.owner = "`probes/` (layout in `probes_schema.*`)";
  s.sizes = {{"layer", "the entries of attribute 'layers'"},
             {"k", "the entries of attribute 'ks'"},
             {"seed", "attribute 'seeds'"},
             {"test_prompt", "the test prompts of a seed's split"},
             {"prompt", "the prompts of the main activations file"},
             {"feature", "the probe's input features (the state's width H)"},
             {"output", "the target's entries (d; d(d+1)/2 for X'X)"},
             {"lambda", "the penalties of attribute 'lambdas' of /ridge"},
             {"position", "the positions a pooled probe weighs"},
             {"block", "the codelength's blocks (attribute 'fractions' of /codelength)"},
             {"target", "the entries of attribute 'targets'"}};
  AddRootAttributes(s);
  AddScores(s);
  AddFits(s);
  return s;
}

}  // namespace

const formats::Schema& ProbesSchema() {
  static const formats::Schema s = Make();
  return s;
}

}  // namespace icl::probes::schema
