// The tidy CSV of datasets of one shape: one row per element, a column per
// dimension (named by its label) and a column per dataset, derived from the
// schema. The stages' own CSVs add columns computed from several datasets; this
// is the plain long form of any part of any file.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "formats/reader.hpp"
#include "formats/schema.hpp"

namespace icl::formats {

// Coordinates of a dimension by its label ("layer": {"0", "2", "4"}); a
// dimension without them is numbered 0, 1, ...
using Coords = std::map<std::string, std::vector<std::string>>;

// `datasets` (the schema's names, all of one shape and one set of labels;
// std::logic_error otherwise) with `values` row-major, one vector per dataset.
// Numbers as {:.6g}, NaN as an empty cell.
void WriteTidyCsv(std::ostream& os, const Schema& schema, const std::vector<std::string>& datasets,
                  const Sizes& sizes, const Coords& coords,
                  const std::vector<std::vector<double>>& values);
// The same read from a file through its checked reader.
void WriteTidyCsv(std::ostream& os, const Reader& reader, const Schema& schema,
                  const std::vector<std::string>& datasets, const Sizes& sizes,
                  const Coords& coords = {});

}  // namespace icl::formats
