// Learners trained elsewhere: reading their tensors and mapping Garg et al.'s GPT-2
// in-context regression layout ("What can transformers learn in context?", 2022) onto iclprobe's
// transformer, which computes the same function:
//   _read_in Linear(d -> H) on width-d tokens (x-token x, y-token [y, 0, ..., 0]) becomes
//     input_proj on width-(d+1) tokens ([0, x] and [y, 0_d]): column 0 takes read_in's first
//     column (it multiplies y), columns 1..d take all of read_in (they multiply x);
//   GPT-2's learned positions (2 n_positions rows) -> pos_embed (the first 2 n rows);
//   Conv1D weights are stored [in, out]: transposed into Linear's [out, in]; the fused c_attn
//     splits into q, k, v and then heads in the same order as in_proj;
//   ln_1, ln_2, ln_f (eps 1e-5), tanh GELU, read-out at the x-tokens: as in iclprobe.
#pragma once

#include <string>

#include "interop/tensors.hpp"
#include "learners/model_config.hpp"
#include "learners/transformer.hpp"

namespace icl::interop {

using learners::ModelConfig;
using learners::Transformer;

// What the tensors do not say: heads (required), and optionally d and the number of examples n
// (defaults: read_in's input width; the positions the model has, n_positions). A value given
// here that contradicts the tensors is an error naming the tensor and both shapes.
struct GargShape {
  int heads = 0;
  int d = 0;
  int n = 0;
};

// The layouts a learner trained elsewhere is read in; Garg et al.'s is the one so far. Parsed
// here, not in a front end, so that every front end offers the same choices.
enum class ImportLayout { kGarg };
// "garg" -> kGarg; core::InputError (module "import", setting "format") naming the choices for
// any other name.
ImportLayout ParseImportLayout(const std::string& name);

// Builds the iclprobe transformer (norm "layer", mlp_ratio from c_fc) with Garg's weights.
// Throws core::InputError (setting `field`) naming the tensor: a missing or unexpected tensor, a
// shape that does not fit the others, a value that is not finite.
Transformer FromGarg(const NamedTensors& tensors, const GargShape& shape, const std::string& field,
                     ModelConfig* config);

}  // namespace icl::interop
