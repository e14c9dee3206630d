// Checkpoints: one self-describing HDF5 file per learner (docs/design.md "checkpoint.h5").
// /params/<module path> float32 datasets; root attrs format, format_version, created_by,
// model_config, train_config, task_config, step; /train_state holds the AdamW moments that an
// exact resume needs. CheckpointSchema writes the layout down as a schema.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "formats/schema.hpp"
#include "learners/flat_adamw.hpp"
#include "learners/model_config.hpp"
#include "learners/transformer.hpp"

namespace icl::h5 {
class File;
}

namespace icl::learners {

inline constexpr const char* kCheckpointFormat = "iclprobe-checkpoint";

// The names of a checkpoint's groups and attributes, and the axes of its tensors.
namespace checkpoint_layout {
inline constexpr const char* kParams = "params";
inline constexpr const char* kTrainState = "train_state";
inline constexpr const char* kExpAvg = "exp_avg";       // in kTrainState
inline constexpr const char* kExpAvgSq = "exp_avg_sq";  // in kTrainState
inline constexpr const char* kModelConfig = "model_config";
inline constexpr const char* kTrainConfig = "train_config";
inline constexpr const char* kTaskConfig = "task_config";
inline constexpr const char* kStep = "step";  // at the root and in kTrainState
inline constexpr const char* kParameterCount = "parameter_count";
inline constexpr const char* kDescription = "description";  // of kParams and kTrainState
inline constexpr const char* kAdamStep = "adam_step";
inline constexpr const char* kLossSumSinceEval = "loss_sum_since_eval";
inline constexpr const char* kLossStepsSinceEval = "loss_steps_since_eval";
// Root attributes of a learner trained elsewhere and imported (written by apps/import.cpp).
inline constexpr const char* kImportedFrom = "imported_from";
inline constexpr const char* kImportedSha256 = "imported_sha256";
inline constexpr const char* kImportedFormat = "imported_format";
inline constexpr const char* kImportedTrainStep = "imported_train_step";
inline constexpr const char* kParamsDescription =
    "one float32 dataset per parameter, named by module path";
inline constexpr const char* kTrainStateDescription =
    "AdamW moments per parameter; training prompts are a function of (seed, step), so no sampler "
    "state is needed";
// The learned positions (a parameter, and the moments' name for it).
inline constexpr const char* kPosEmbed = "pos_embed";
// Linear weights are [output, input], biases and LayerNorm scales [feature], the learned
// positions [position, feature].
inline const std::vector<std::string> kWeightLabels = {"output", "input"};
inline const std::vector<std::string> kVectorLabels = {"feature"};
inline const std::vector<std::string> kPositionLabels = {"position", "feature"};
}  // namespace checkpoint_layout

// The checkpoint as learners/ writes it (root attributes, /params, /train_state, an import's
// attributes), as a schema; construct::CheckpointSchema() adds the /construction group of a
// constructed learner, and is the whole format.
const formats::Schema& CheckpointSchema();

struct CheckpointInfo {
  std::string path;
  ModelConfig model;
  TrainConfig train;
  std::int64_t step = 0;
  bool has_train_state = false;
  std::string created_by;  // the program that wrote it ("" when not recorded)
};

// Reads and checks the root attributes only (format, version, configs).
CheckpointInfo ReadCheckpointInfo(const std::string& path);

// Throws core::InputError (setting "checkpoint") unless the learner reads prompts of `task`
// (the same d, at most n_max examples).
void CheckReadsTask(const CheckpointInfo& info, const data::TaskConfig& task);

// Where two checkpoints' recipes differ, "" when they are seeds of one cell: the same model
// configuration and the same training configuration (task, steps, schedule, batch, ...) except
// the training settings named in `free` (by default the seed, the number of shards a batch is
// computed in and how often it saved). The model's `kernels` never counts: it is the same
// function to float32 rounding. Names the first differing setting, e.g.
// "model_config layers: 4 vs 8".
std::string RecipeDifference(const CheckpointInfo& a, const CheckpointInfo& b,
                             const std::vector<std::string>& free = {"seed", "shards",
                                                                     "save_every"});

// The training loss summed since the last evaluation, which the next row of the evaluation log
// averages: kept in /train_state, so that a run resumed between two evaluations logs what an
// uninterrupted run logs.
struct LossSinceEval {
  double sum = 0;
  std::int64_t steps = 0;
};

struct SaveOptions {
  const LossSinceEval* loss_since_eval = nullptr;  // with the optimizer state (train)
  bool force = true;                // replace an existing file (a run overwrites its own)
  std::vector<std::string> inputs;  // files that must not be replaced (e.g. an exported source)
  bool lock = true;                 // take the output lock (false: the caller holds it)
  std::string field = "out";        // the setting that names the output, for messages
  // Writes more groups into the file before it is closed (construct's /construction).
  std::function<void(h5::File&)> extra;
};

// Writes `model` (and, when `optimizer` is given, AdamW's state) to `path` atomically: a temporary
// file, every write checked and synced, then renamed into place, so an interrupted or failed
// save (disk full) never leaves a half-written checkpoint under the final name.
void SaveCheckpoint(const std::string& path, Transformer& model, const TrainConfig& train,
                    std::int64_t step, const AdamMoments* optimizer,
                    const SaveOptions& options = {});

// Builds the model of a checkpoint and loads its parameters, refusing a file whose format,
// version, parameter names or shapes do not match, with a message naming the parameter.
Transformer LoadCheckpoint(const std::string& path, CheckpointInfo* info = nullptr);

// The AdamW state saved by SaveCheckpoint, a moment of `model`'s shape per parameter, checked
// like the parameters themselves.
AdamMoments LoadOptimizerState(const std::string& path, Transformer& model);

// The LossSinceEval a checkpoint of step `step` keeps, checked: finite, non-negative, and of
// step % eval_every steps. Checkpoints written before it was kept have none: then it is empty
// unless the step is a multiple of eval_every (nothing to average), and std::nullopt otherwise.
std::optional<LossSinceEval> LoadLossSinceEval(const std::string& path, std::int64_t step,
                                               std::int64_t eval_every);

}  // namespace icl::learners
