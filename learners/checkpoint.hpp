// Checkpoints: one self-describing HDF5 file per learner (docs/design.md "checkpoint.h5").
// /params/<module path> float32 datasets; root attrs format, format_version, created_by,
// model_config, train_config, task_config, step; /train_state holds the AdamW moments that an
// exact resume needs.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "learners/flat_adamw.hpp"
#include "learners/model_config.hpp"
#include "learners/transformer.hpp"

namespace icl::h5 {
class File;
}

namespace icl::learners {

inline constexpr const char* kCheckpointFormat = "iclprobe-checkpoint";

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
