// What the probe engine knows of a source of hidden states and targets: the shapes it probes,
// and, for an activations file, the file's own description (its provenance). An activations
// file (DescribeActivations) and arrays held in memory (DescribeArrays) both produce one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "extract/activations.hpp"

namespace icl::probes {

struct StatesInfo {
  std::string name;          // the file's path, or the name a caller gives its arrays
  std::int64_t prompts = 0;  // N
  std::vector<int> layers;   // stored states: a file's ascending, arrays' in their order
  int hidden = 0;            // H, features of one state
  int model_layers = 0;      // the learner's blocks (states 0..model_layers)
  int n = 0;                 // examples per prompt: k = 1..n
  int d = 0;                 // the regression's dimension
  std::uint64_t seed = 0;    // the prompts' seed (arrays: 0, the same prompts by the caller's word)
  extract::Positions positions = extract::Positions::kAll;
  int positions_per_prompt = 0;      // T: 2n (kAll) or n (kY)
  std::vector<std::string> targets;  // names the source holds
  std::vector<bool> target_per_k;    // false for k-independent targets such as w
  // The activations file the states are read from: its model, task, checkpoint, the lambda of
  // w_ridge and its learner targets, which a probes file records. None for arrays.
  std::optional<extract::ActivationsInfo> file;
};

// An activations file's description as the engine reads it.
StatesInfo DescribeActivations(extract::ActivationsInfo info);

// Arrays in memory: `prompts` prompts' states at the (distinct) layer labels `layers`,
// `positions_per_prompt` states of `hidden` features each, laid out as `positions` says (kAll:
// x_1 y_1 ... x_n y_n, so an even count; kY: the state after each of n examples); targets by
// name with their entries per prompt and k (d: the first target's). Throws core::InputError
// naming the setting ("hidden", "layers", "targets") when the shapes do not describe a source.
// The layout of arrays of `positions_per_prompt` states whose per-k targets have K =
// `target_k` values (0: no target has a k axis): kY when the states match K (or no target
// says), kAll when there are 2K of them; core::InputError (setting "targets") otherwise.
extract::Positions InferPositions(int positions_per_prompt, int target_k);

StatesInfo DescribeArrays(const std::string& name, std::int64_t prompts, std::vector<int> layers,
                          int positions_per_prompt, int hidden, extract::Positions positions,
                          const std::vector<std::pair<std::string, int>>& targets);

}  // namespace icl::probes
