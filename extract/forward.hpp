// The forward pass of extract on one group of prompts: what makes an activations file's numbers,
// shared with every caller that must reproduce them (the Python module's Transformer.forward).
#pragma once

#include <cstdint>

#include "data/task.hpp"
#include "learners/transformer.hpp"

namespace icl::extract {

// The forward pass extract runs on prompts [g0, g0 + g) of `set`, g <= kComputeGroup, padded
// to a whole group and run whole with hidden states: every state l = 0..L as [g, 2n, H] and the
// predictions [g, n]. Called with g0 a multiple of kComputeGroup and torch's and OpenBLAS's
// pools serial (as extract calls it), a prompt's numbers are those of an activations file.
learners::ForwardResult RunGroup(learners::Transformer& model, const data::PromptSet& set,
                                 std::int64_t g0, std::int64_t g);

}  // namespace icl::extract
