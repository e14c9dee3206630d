// The activations file's per-prompt datasets, and the whole file as a schema.
#include "extract/activations_schema.hpp"

#include <fmt/format.h>

#include <cctype>

#include "data/prompt_io.hpp"
#include "extract/extract.hpp"

namespace icl::extract::schema {

std::string Hidden(int layer) {
  return fmt::format("{}{:02d}", kHiddenPrefix, layer);
}

std::string LearnerTargetName(const std::string& spec) {
  std::string name = kLearnerTargetPrefix + spec;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  return name;
}

std::string LearnerTarget(const std::string& spec) {
  return std::string(kTargetsGroup) + "/" + LearnerTargetName(spec);
}

std::string GroupDigestsDescription(int group) {
  return fmt::format(
      "SHA-256 of the rows of each group of {} prompts: every hidden state in layer order, then "
      "predictions, prompts/x, y, w, targets/w_ols, w_ridge, xty, xtx (native little-endian "
      "bytes); the root attribute content_sha256 is SHA-256 of extract_config (JSON, without "
      "compress), a newline, checkpoint_sha256, a newline and these digests",
      group);
}

namespace {

// A per-prompt dataset whose row is named by `sizes` ("n", "d" or a number).
Dataset PerPrompt(const std::string& name, std::vector<std::string> sizes, int n, int d,
                  bool is_float32, const std::string& description, std::vector<std::string> labels,
                  const std::string& learner = "") {
  h5::Dims row;
  for (const std::string& s : sizes)
    row.push_back(s == "n" ? hsize_t(n) : s == "d" ? hsize_t(d) : hsize_t(std::stoull(s)));
  return {name, row, is_float32, description, std::move(labels), learner, std::move(sizes)};
}

}  // namespace

std::vector<Dataset> PerPromptDatasets(int n, int d,
                                       const std::vector<std::string>& learner_targets,
                                       const data::TaskFamily& family) {
  std::vector<Dataset> out = {
      PerPrompt(kPredictions, {"n"}, n, d, true,
                "[N, n] the model's prediction of y_{k+1} from k examples, k = 0..n-1",
                {"prompt", "k"}),
      PerPrompt(kPromptsX, {"n", "d"}, n, d, false, "[N, n, d] inputs x_j",
                {"prompt", "example", "feature"}),
      PerPrompt(kPromptsY, {"n"}, n, d, false, "[N, n] labels y_j", {"prompt", "example"}),
      PerPrompt(kPromptsW, {"d"}, n, d, false, "[N, d] the task's weight vector",
                {"prompt", "feature"}),
      PerPrompt(kWOls, {"n", "d"}, n, d, false,
                "[N, n, d] minimum-norm least squares after k = 1..n examples",
                {"prompt", "k", "feature"}),
      PerPrompt(kWRidge, {"n", "d"}, n, d, false,
                "[N, n, d] ridge (lambda = ridge_lambda) after k = 1..n examples",
                {"prompt", "k", "feature"}),
      PerPrompt(kXty, {"n", "d"}, n, d, false,
                "[N, n, d] moment vector X_k^T y_k after k = 1..n examples",
                {"prompt", "k", "feature"}),
      PerPrompt(kXtx, {"n", "d", "d"}, n, d, false,
                "[N, n, d, d] moment matrix X_k^T X_k after k = 1..n examples",
                {"prompt", "k", "row", "column"}),
  };
  for (const std::string& spec : learner_targets)
    out.push_back(PerPrompt(
        LearnerTarget(spec), {"n", "d"}, n, d, false,
        "[N, n, d] the weights of the classical learner " + spec + " after k = 1..n examples",
        {"prompt", "k", "feature"}, spec));
  if (family.kind == data::TaskFamily::Kind::kPool)
    out.push_back(PerPrompt(kPoolMember, {"1"}, n, d, false,
                            "[N, 1] the member of the task's pool (0-based) each prompt's w is",
                            {"prompt", "feature"}));
  if (family.kind == data::TaskFamily::Kind::kNoiseMix)
    out.push_back(PerPrompt(kSigma, {"1"}, n, d, false,
                            "[N, 1] the noise sigma each prompt drew (the same after every k)",
                            {"prompt", "feature"}));
  return out;
}

namespace {

using formats::AttrType;
using formats::Values;

// A per-prompt dataset as a declaration: [prompt, row...], its fixed description unless it
// varies (a learner target's names its learner).
formats::DatasetSpec Declared(const Dataset& d, const std::string& path, const std::string& when,
                              Values values, bool fixed_description = true) {
  std::vector<std::string> shape = {"prompt"};
  shape.insert(shape.end(), d.row_sizes.begin(), d.row_sizes.end());
  // The page's description: the attribute's text without its leading shape ("[N, n] ").
  const std::size_t shape_end = d.description.find("] ");
  const std::string text = d.description.rfind('[', 0) == 0 && shape_end != std::string::npos
                               ? d.description.substr(shape_end + 2)
                               : d.description;
  formats::DatasetSpec spec = formats::Data(path, shape, d.labels, text, values);
  if (fixed_description) spec.attrs = {{"description", d.description}};
  spec.when = when;
  spec.element = d.is_float32 ? "float32" : "float64";
  return spec;
}

void AddRootAttributes(formats::Schema& s) {
  formats::AttrSpec semantics =
      formats::Attr("layer_semantics", AttrType::kString, "what each state is");
  semantics.value = kLayerSemantics;
  formats::AttrSpec tokens =
      formats::Attr("token_layout", AttrType::kString, "how a prompt is laid out as tokens");
  tokens.value = kTokenLayout;
  s.attrs = {
      formats::Attr("model_config", AttrType::kString, "the checkpoint's model (JSON)"),
      formats::Attr("task_config", AttrType::kString, "the prompts' task (JSON)"),
      formats::Attr("train_config", AttrType::kString, "the checkpoint's training run (JSON)"),
      formats::Attr("seed", AttrType::kInt, "the prompts' seed"),
      formats::Attr("prompts", AttrType::kInt, "N"),
      formats::Attr("checkpoint_sha256", AttrType::kString, "SHA-256 of the checkpoint"),
      formats::Attr("checkpoint_path", AttrType::kString, "the checkpoint's path"),
      formats::Attr("checkpoint_step", AttrType::kInt, "the checkpoint's training steps"),
      semantics,
      tokens,
      formats::Attr("positions", AttrType::kString,
                    "all (every token) or y (the y-tokens: the states after k examples)"),
      formats::Attr("layers", AttrType::kIntList, "the stored states, ascending"),
      formats::Attr("chunk_rows", AttrType::kInt, "prompts per HDF5 chunk"),
      formats::Attr("extract_config", AttrType::kString,
                    "what determines the contents (JSON): the task, N, the seed, the states, "
                    "positions, ridge_lambda, compress, the model; hidden_dtype and "
                    "learner_targets where given"),
      formats::Attr("n_complete", AttrType::kInt,
                    "prompts written (N in a finished file; a partial file counts on)"),
      formats::Attr("content_sha256", AttrType::kString,
                    "SHA-256 of extract_config, checkpoint_sha256 and the row digests",
                    "a finished file (extract's partial file lacks it)"),
  };
}

void AddGroupAttributes(formats::Schema& s, const std::string& learner_target) {
  namespace ps = data::prompt_set;
  const std::string hidden = kHiddenGroup, targets = kTargetsGroup, prompts = ps::kGroup;
  formats::AttrSpec targets_description =
      formats::AttrOn(targets, "description", AttrType::kString, "what the targets are");
  targets_description.value = kTargetsDescription;
  const std::vector<formats::AttrSpec> attrs = {
      formats::AttrOn(hidden, "positions", AttrType::kString, "as the root's"),
      formats::AttrOn(hidden, "dtype", AttrType::kString, "float32 or float16"),
      formats::AttrOn(hidden, "description", AttrType::kString, "what the states are"),
      formats::AttrOn(kHiddenPrefix + std::string("<layer>"), "layer", AttrType::kInt, "the state"),
      formats::AttrOn(prompts, ps::kTaskConfig, AttrType::kString, "the task (JSON)"),
      formats::AttrOn(prompts, ps::kSeed, AttrType::kInt, "the prompts' seed"),
      formats::AttrOn(prompts, ps::kFirstIndex, AttrType::kInt, "0: the stream's first prompt"),
      formats::AttrOn(kPromptsW, "per_k", AttrType::kInt, "0: the same for every k"),
      formats::AttrOn(targets, "ridge_lambda", AttrType::kDouble, "the lambda of w_ridge"),
      targets_description,
      formats::AttrOn(kW, "per_k", AttrType::kInt, "0: the same for every k"),
      formats::AttrOn(kWRidge, "ridge_lambda", AttrType::kDouble, "its lambda"),
      formats::AttrOn(kXtx, "symmetric", AttrType::kInt,
                      "1: probed as its d(d+1)/2 upper-triangle entries"),
      formats::AttrOn(learner_target, "description", AttrType::kString,
                      "[N, n, d] the weights of the classical learner <spec> after k = 1..n "
                      "examples"),
      formats::AttrOn(learner_target, "learner", AttrType::kString, "the learner's spec"),
  };
  s.attrs.insert(s.attrs.end(), attrs.begin(), attrs.end());
  formats::AttrSpec sigma_per_k =
      formats::AttrOn(kSigma, "per_k", AttrType::kInt, "0: the same for every k");
  sigma_per_k.when = "a noise-mix task";
  s.attrs.push_back(sigma_per_k);
}

void AddDatasets(formats::Schema& s, const std::string& learner_target) {
  const std::string hidden = kHiddenPrefix + std::string("<layer>");
  for (const char* dtype : {"float32", "float16"}) {
    formats::DatasetSpec h =
        formats::Data(hidden, {"prompt", "position", "hidden"}, kHiddenLabels,
                      "state <layer> of every prompt (the entries of attribute 'layers', two "
                      "digits)");
    h.element = dtype;
    h.when = std::string("dtype ") + dtype + " (attribute 'dtype' of /hidden)";
    s.datasets.push_back(h);
  }
  for (const Dataset& d : PerPromptDatasets(/*n=*/1, /*d=*/1)) {
    const bool targets = d.name.rfind(kTargetsGroup, 0) == 0;
    s.datasets.push_back(Declared(d, d.name, "",
                                  targets || d.name.rfind(data::prompt_set::kGroup, 0) == 0
                                      ? Values::kFinite
                                      : Values::kAny));
    if (d.name == kPromptsW) {  // its second name
      formats::DatasetSpec w = Declared(d, kW, "", Values::kFinite);
      w.description = "a second name of /" + std::string(kPromptsW) + " (an HDF5 hard link)";
      s.datasets.push_back(w);
    }
  }
  const Dataset learner = PerPromptDatasets(1, 1, {"spec"}).back();
  s.datasets.push_back(Declared(learner, learner_target,
                                "each learner target (extract_config's learner_targets)",
                                Values::kFinite, /*fixed_description=*/false));
  s.datasets.back().description =
      "the weights of a classical learner (attribute 'learner': its spec) after k = 1..n examples";
  data::TaskFamily pool, noise_mix;
  pool.kind = data::TaskFamily::Kind::kPool;
  noise_mix.kind = data::TaskFamily::Kind::kNoiseMix;
  const Dataset member = PerPromptDatasets(1, 1, {}, pool).back(),
                sigma = PerPromptDatasets(1, 1, {}, noise_mix).back();
  s.datasets.push_back(Declared(member, member.name, "a pool task", Values::kFinite));
  s.datasets.push_back(Declared(sigma, sigma.name, "a noise-mix task", Values::kFinite));
  formats::DatasetSpec digests = formats::Data(
      kGroupDigests, {"group", "32"}, kDigestLabels, "SHA-256 of each group's rows (uint8 bytes)",
      Values::kAny, {{"description", GroupDigestsDescription(kComputeGroup)}});
  digests.element = "uint8";
  s.datasets.push_back(digests);
}

formats::Schema Make() {
  formats::Schema s;
  s.format = kFormat;
  s.version = data::kFormatVersion;
  s.title = "A checkpoint's hidden states over a seeded prompt set (`iclprobe extract`).";
  s.description =
      "Every stored state of every prompt (`<layer>` is each entry of attribute 'layers', 0 = "
      "the embedding .. L, written with two digits), the model's predictions, the prompts, and "
      "the regression targets after k = 1..n examples that probes read: w_ols, w_ridge, the "
      "moments X'y and X'X, the true w (k-independent), and `<learner>`, each learner target of "
      "extract_config (its spec with every character outside [A-Za-z0-9_.-] written '_'). A pool "
      "or noise-mix task also stores what each prompt drew. Datasets grow along the prompt as "
      "extract writes groups of prompts; `<out>.partial` holds the same layout until the run "
      "finishes. Written by `extract/extract_output.cpp` and `extract/extract.cpp`, read through "
      "`extract/activations.cpp` (`iclprobe probe`, `trace` given activations files, "
      "`iclprobe.open`).";
  s.owner = "`extract/` (layout in `activations_schema.*`)";
  s.sizes = {{"prompt", "attribute 'prompts' (N)"},
             {"position", "T: 2n with positions all, n with positions y"},
             {"hidden", "hidden of model_config (H)"},
             {"n", "n of task_config: the examples of a prompt (k = 1..n)"},
             {"d", "d of task_config"},
             {"group", fmt::format("ceil(N / {}): the groups of {} prompts extract computes "
                                   "together",
                                   kComputeGroup, kComputeGroup)}};
  const std::string learner_target =
      std::string(kTargetsGroup) + "/" + kLearnerTargetPrefix + "<learner>";
  AddRootAttributes(s);
  AddGroupAttributes(s, learner_target);
  AddDatasets(s, learner_target);
  return s;
}

}  // namespace

const formats::Schema& ActivationsSchema() {
  static const formats::Schema s = Make();
  return s;
}

}  // namespace icl::extract::schema
