// The layout of activations.h5, written down once: dataset names, row shapes, element types and
// descriptions. extract's writer, the reader (ReadActivationsInfo) and test fixtures all go
// through it; nothing addresses these datasets by position in a list. ActivationsSchema() is the
// same layout as a formats::Schema (the documentation page, the conformance check).
#pragma once

#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/task_family.hpp"
#include "formats/schema.hpp"

namespace icl::extract::schema {

inline constexpr const char* kFormat = "iclprobe-activations";

inline constexpr const char* kPredictions = "predictions";
inline constexpr const char* kPromptsX = "prompts/x";
inline constexpr const char* kPromptsY = "prompts/y";
inline constexpr const char* kPromptsW = "prompts/w";
inline constexpr const char* kWOls = "targets/w_ols";
inline constexpr const char* kWRidge = "targets/w_ridge";
inline constexpr const char* kXty = "targets/xty";
inline constexpr const char* kXtx = "targets/xtx";
inline constexpr const char* kW = "targets/w";  // a second name of prompts/w
// What a prompt of a task family drew (data/task_family.hpp), [N, 1]: the pool member of a pool
// task, and the noise sigma of a noise-mix task (a probe target, the same after every k).
inline constexpr const char* kPoolMember = "prompts/pool_member";
inline constexpr const char* kSigma = "targets/sigma";
// [ceil(n_complete / kComputeGroup), 32] uint8: SHA-256 of each group of kComputeGroup prompts'
// rows, every stored dataset in turn (hidden states in layer order, then the per-prompt
// datasets in schema order), as extract wrote them.
inline constexpr const char* kGroupDigests = "provenance/group_sha256";

// "hidden/layer_07": state 7 of every prompt, [N, T, H] float32 (or float16).
inline constexpr const char* kHiddenGroup = "hidden";
inline constexpr const char* kHiddenPrefix = "hidden/layer_";
std::string Hidden(int layer);
// The group of the regression targets, and the prefix of the learner targets' names.
inline constexpr const char* kTargetsGroup = "targets";
inline constexpr const char* kLearnerTargetPrefix = "w_";
// The axes of a hidden-state dataset.
inline const std::vector<std::string> kHiddenLabels = {"prompt", "position", "feature"};
// The axes of the row digests.
inline const std::vector<std::string> kDigestLabels = {"group", "byte"};

// What the root attributes layer_semantics and token_layout say, in every file.
inline constexpr const char* kLayerSemantics =
    "state 0 = embedding (input projection + learned positions); state l = 1..L = residual "
    "stream after transformer block l (pre-LayerNorm blocks; the final LayerNorm is not applied)";
inline constexpr const char* kTokenLayout =
    "tokens interleave x-token [0, x_j] (0-based position 2(j-1)) and y-token [y_j, 0_d] "
    "(position 2j-1), j = 1..n, width d+1. The prediction of y_{k+1} is read at position 2k "
    "(k = 0..n-1); the state after k examples (k = 1..n) is position 2k-1. With positions = y, "
    "hidden index k-1 is the state after k examples.";
// What the attribute description of /targets says.
inline constexpr const char* kTargetsDescription =
    "regression quantities after k examples; index k-1 along the second axis is the value after "
    "k examples (w, the true weights [N, d], is the same for every k)";
// What the attribute description of kGroupDigests says, for groups of `group` prompts.
std::string GroupDigestsDescription(int group);

// One per-prompt dataset other than the hidden states: [N, row...].
struct Dataset {
  std::string name;
  h5::Dims row;     // the shape of one prompt's entry
  bool is_float32;  // float32 (model outputs) or float64 (prompts and targets)
  std::string description;
  std::vector<std::string> labels;  // the axes, the prompt's first (HDF5 dimension labels)
  std::string learner;  // a learner target: the classical learner's spec (attribute "learner")
  // The sizes of `row` by name, as ActivationsSchema names them: "n", "d" or a number.
  std::vector<std::string> row_sizes;
};

// Every per-prompt dataset besides the hidden states, for prompts of n examples in d dims,
// the learner targets (classical learners' weights after k examples) in the order given, then
// what the task family's prompts drew (kPoolMember, kSigma), if anything.
std::vector<Dataset> PerPromptDatasets(int n, int d,
                                       const std::vector<std::string>& learner_targets = {},
                                       const data::TaskFamily& family = {});

// The dataset of a learner target: "targets/w_" + the spec with every character outside
// [A-Za-z0-9_.-] replaced by '_' ("gd:0.05:3" -> "targets/w_gd_0.05_3"); the spec itself is
// the dataset's attribute "learner".
std::string LearnerTarget(const std::string& spec);
// The same without the group: the target's name as probes and reports use it ("w_gd_0.05_3").
std::string LearnerTargetName(const std::string& spec);

// The activations file as a schema: every dataset (hidden states per stored state, predictions,
// prompts, targets, learner targets, what a task family drew, the row digests), its shape, labels
// and element type, and every attribute.
const formats::Schema& ActivationsSchema();

}  // namespace icl::extract::schema
