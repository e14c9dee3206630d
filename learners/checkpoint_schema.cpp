// The checkpoint's layout as a schema (checkpoint.hpp's CheckpointSchema): what SaveCheckpoint
// writes, for the documentation page and the conformance check of its files.
#include <string>

#include "data/prompt_io.hpp"
#include "learners/checkpoint.hpp"

namespace icl::learners {

namespace {

namespace layout = checkpoint_layout;
using formats::AttrType;

// The tensors of one group, one per parameter (the parameters themselves, or one of AdamW's
// moments): the learned positions, and every other parameter by its rank.
void AddTensors(formats::Schema& s, const std::string& group, const std::string& what,
                const std::string& when) {
  const std::string g = group + "/";
  s.datasets.push_back(formats::Data(
      g + layout::kPosEmbed, {"position", "hidden"}, layout::kPositionLabels,
      what + " of pos_embed, the learned positions", formats::Values::kFinite, {}, when));
  s.datasets.push_back(formats::Data(g + "<parameter>", {"output", "input"}, layout::kWeightLabels,
                                     what + " of each weight matrix (a linear map's, output x "
                                            "input)",
                                     formats::Values::kFinite, {}, when));
  s.datasets.push_back(formats::Data(
      g + "<parameter>", {"feature"}, layout::kVectorLabels,
      what + " of each vector parameter (the biases and the LayerNorms' scales and shifts)",
      formats::Values::kFinite, {}, when));
  for (std::size_t i = s.datasets.size() - 3; i < s.datasets.size(); ++i)
    s.datasets[i].element = "float32";
}

void AddAttributes(formats::Schema& s) {
  const std::string ts = layout::kTrainState, imported = "a learner imported (`iclprobe import`)";
  formats::AttrSpec params_description =
      formats::AttrOn(layout::kParams, layout::kDescription, AttrType::kString, "what it holds");
  params_description.value = layout::kParamsDescription;
  formats::AttrSpec state_description =
      formats::AttrOn(ts, layout::kDescription, AttrType::kString, "what it holds");
  state_description.value = layout::kTrainStateDescription;
  formats::AttrSpec loss_sum =
      formats::AttrOn(ts, layout::kLossSumSinceEval, AttrType::kDouble,
                      "the training loss summed since the last evaluation, which the next row of "
                      "the evaluation log averages");
  formats::AttrSpec loss_steps = formats::AttrOn(ts, layout::kLossStepsSinceEval, AttrType::kInt,
                                                 "the steps of that sum (step % eval_every)");
  loss_sum.when = loss_steps.when = "older checkpoints lack it";
  s.attrs = {
      formats::Attr(layout::kModelConfig, AttrType::kString,
                    "the model (JSON: d, n_max, layers, hidden, heads, mlp_ratio; norm, kernels "
                    "and bottleneck where not their defaults)"),
      formats::Attr(layout::kTrainConfig, AttrType::kString,
                    "the training run (JSON: its task, steps, batch, lr, warmup, AdamW's "
                    "settings, clip, seed, evaluation, save_every, shards)"),
      formats::Attr(layout::kTaskConfig, AttrType::kString,
                    "the training task (JSON; train_config's task)"),
      formats::Attr(layout::kStep, AttrType::kInt, "the training steps taken"),
      formats::Attr(layout::kParameterCount, AttrType::kInt, "the model's parameters"),
      formats::Attr(layout::kImportedFrom, AttrType::kString, "the imported file's path", imported),
      formats::Attr(layout::kImportedSha256, AttrType::kString, "SHA-256 of the imported file",
                    imported),
      formats::Attr(layout::kImportedFormat, AttrType::kString,
                    "garg (safetensors) or garg (torch.save[, under its key])", imported),
      formats::Attr(layout::kImportedTrainStep, AttrType::kInt,
                    "the training step the imported file records",
                    "an imported torch.save file that records it"),
      params_description,
      formats::AttrOn(ts, layout::kStep, AttrType::kInt, "the root's step"),
      state_description,
      formats::AttrOn(ts, layout::kAdamStep, AttrType::kInt,
                      "AdamW's steps (one per training step: the root's step)"),
      loss_sum,
      loss_steps,
  };
}

formats::Schema Make() {
  formats::Schema s;
  s.format = kCheckpointFormat;
  s.version = data::kFormatVersion;
  s.title = "A learner: a transformer's parameters, its configuration and its training state.";
  s.description =
      "One file per learner. `/params` holds every parameter of the model float32, named by its "
      "module path (LibTorch's named_parameters): `<parameter>` is input_proj.weight [H, d + 1] "
      "and .bias [H]; readout.weight [1, H] and .bias [1]; for each block i = 0..L-1, "
      "blocks.i.attn.in_proj_weight [3H, H] and in_proj_bias [3H], blocks.i.attn.out_proj.weight "
      "[H, H] and .bias [H], blocks.i.fc1.weight [mlp_ratio H, H] and .bias [mlp_ratio H], "
      "blocks.i.fc2.weight [H, mlp_ratio H] and .bias [H]; with norm layer also "
      "blocks.i.ln1 and ln2 .weight and .bias [H] and final_ln.weight and .bias [H] (H, L, d, "
      "n_max, mlp_ratio and norm as in model_config); pos_embed [2 n_max, H] is declared apart. "
      "`iclprobe train` saves `/train_state` beside them, AdamW's two moments of every parameter "
      "(same names, shapes and labels), which an exact resume needs; an untrained learner of "
      "`train` (init only), an export of `inspect`, `import` and `construct` write none. A learner "
      "of `iclprobe import` "
      "records its source in the root attributes imported_*, and one of `iclprobe construct` "
      "has `/construction`: its program, the rows of the residual stream each quantity lies in, "
      "and the maps of its disguises.";
  s.owner =
      "`learners/checkpoint.cpp` (the root attributes, `/params` and `/train_state`; the "
      "attributes of an import are named there and written by `apps/import.cpp`)";
  s.sizes = {{"position", "2 n_max of model_config: the token positions a learner embeds"},
             {"hidden", "hidden of model_config (H)"},
             {"output", "a linear map's output width (see the description)"},
             {"input", "a linear map's input width"},
             {"feature", "a vector parameter's length"}};
  AddAttributes(s);
  AddTensors(s, layout::kParams, "the values", "");
  s.datasets.front().description += " (added to the tokens' input projection)";
  const std::string ts = layout::kTrainState;
  const std::string moments = "checkpoints of `iclprobe train` after its first step";
  AddTensors(s, ts + "/" + layout::kExpAvg, "AdamW's first moment", moments);
  AddTensors(s, ts + "/" + layout::kExpAvgSq, "AdamW's second moment (non-negative)", moments);
  return s;
}

}  // namespace

const formats::Schema& CheckpointSchema() {
  static const formats::Schema s = Make();
  return s;
}

}  // namespace icl::learners
