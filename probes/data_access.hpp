// What probes read from an activations file: prompt splits, targets per k, blocks of hidden
// states. Targets are small and held in memory; hidden states are streamed in blocks of rows.
#pragma once

#include <armadillo>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "extract/activations.hpp"
#include "probes/source.hpp"

namespace icl::probes {

enum class Role : std::uint8_t { kTrain = 0, kVal = 1, kTest = 2 };

// A seeded split of prompts 0..N-1 into train / validation / test by the given fractions
// (normalised). Throws core::InputError when any part would be empty.
std::vector<Role> SplitPrompts(std::int64_t prompts, const std::array<double, 3>& fractions,
                               std::uint64_t seed);

// Indices of the prompts with a given role.
arma::uvec RoleIndices(const std::vector<Role>& roles, Role role);

// One target, per k: values[k-1] is m x N (column i = prompt i). A symmetric matrix target
// (attribute symmetric = 1, like xtx) is kept as its d(d+1)/2 upper-triangle entries; a
// k-independent target (per_k = 0, like w) has the same matrix for every k.
struct Target {
  std::string name;
  arma::uword dims = 0;  // m
  std::vector<arma::mat> values;
};

// Loads /targets/<name> of an activations file (info.file); throws naming the file and the
// entry when a value is not finite.
Target LoadTarget(const StatesInfo& info, const std::string& name);

// Blocks of hidden states, read through the activations file's one reader.
using extract::HiddenReader;

// Hidden-state row of the state after k examples inside the (T * H) block layout.
int AfterKPosition(const StatesInfo& info, int k);

}  // namespace icl::probes
