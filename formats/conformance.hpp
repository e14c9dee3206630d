// Whether a file is what its schema says, object by object, so that a schema (and the page
// generated from it) cannot drift from what a writer really writes: every dataset, group and
// attribute of the file is declared, and every dataset and attribute declared without a
// condition ('when') is there. Values are not read: the checked readers judge them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "formats/schema.hpp"

namespace icl::formats {

struct Conformance {
  // One line per fault ("/hidden/layer_01: dimension labels (prompt, k), declared (prompt,
  // position, feature)"); empty when the file conforms.
  std::vector<std::string> problems;
  // Per entry of the schema's datasets: how many datasets of the file it describes (what a test
  // reads to see that its files exercise every declaration).
  std::vector<std::size_t> matched;
};

// Checks the file (or the group holding a file's root) against `schema`:
// - the header: the schema's format and a version it reads (1..version);
// - each dataset's path is declared (a <name> stands for one or more characters of one path
//   segment; a path declared literally is described by that declaration alone), and one
//   declaration of that path has its rank, its fixed sizes (a size named twice has one value),
//   its dimension labels (where it declares them), its element type and its fixed attributes;
// - each group leads to a declared path or carries declared attributes;
// - each attribute (HDF5's own DIMENSION_LABELS aside) is declared on its object, stored as its
//   declared type (scalars, lists of rank 1) and, where the schema fixes its text, with that text;
// - each dataset and attribute declared without a 'when' is there: a dataset path at least once,
//   an attribute on every object its declaration describes.
Conformance ConformanceOf(const h5::Group& root, const Schema& schema);
Conformance ConformanceOf(const std::string& path, const Schema& schema);

// Throws core::InputError naming the file and its faults (the first few) unless it conforms.
void CheckConforms(const std::string& path, const Schema& schema);

}  // namespace icl::formats
