// What the files of intervene/ (interventions, swaps, erasure) read alike: the layers and k of a
// run from their attributes, and datasets of finite doubles of a stated shape. Internal to
// intervene/; each file's owner keeps its own schema.
#pragma once

#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/task.hpp"

namespace icl::intervene {

// The attributes 'layers' (each in 0..kMaxLayers) and 'ks' (each in 1..n-1 of `task`): non-empty,
// no entry twice. Throws core::InputError naming the file (`where`).
void ReadLayersAndKs(const h5::File& f, const std::string& where, const data::TaskConfig& task,
                     std::vector<int>& layers, std::vector<int>& ks);

// Dataset `name` of shape `dims`, every value finite.
std::vector<double> ReadFinite(const h5::File& f, const std::string& where, const char* name,
                               const h5::Dims& dims);

}  // namespace icl::intervene
