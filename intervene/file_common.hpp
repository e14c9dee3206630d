// What the runs and files of intervene/ (interventions, swaps, erasure, DAS) share: the layers
// and k of a run, resolved against the model or read from a file's attributes, and datasets of
// finite doubles of a stated shape. Internal to intervene/; each file's owner keeps its schema.
#pragma once

#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/task.hpp"
#include "learners/model_config.hpp"

namespace icl::intervene {

// The states and k of a run: `layers_in` (every state 0..L when empty) and `ks_in` (k_first..n-1
// when empty), each checked against the model (a state it lacks) and the task (the query
// x_(k+1) must exist), after checking that the task's prompts fit the model. Throws
// core::InputError naming `command` and the setting ("checkpoint", "layers", "k").
void ResolveLayersAndKs(const std::string& command, const learners::ModelConfig& mc,
                        const data::TaskConfig& task, const std::vector<int>& layers_in,
                        const std::vector<int>& ks_in, std::vector<int>& layers,
                        std::vector<int>& ks, int k_first = 1);

// The attributes 'layers' (each in 0..kMaxLayers) and 'ks' (each in 1..n-1 of `task`): non-empty,
// no entry twice. Throws core::InputError naming the file (`where`).
void ReadLayersAndKs(const h5::File& f, const std::string& where, const data::TaskConfig& task,
                     std::vector<int>& layers, std::vector<int>& ks);

// Dataset `name` of shape `dims`, every value finite.
std::vector<double> ReadFinite(const h5::File& f, const std::string& where, const char* name,
                               const h5::Dims& dims);

}  // namespace icl::intervene
