// What the report's table writers share: a name made safe for a table cell. Internal to
// analysis/.
#pragma once

#include <string>

#include "analysis/report.hpp"

namespace icl::analysis {

// `s` as a cell of a `f` table: underscores escaped for LaTeX, unchanged otherwise.
std::string Escape(const std::string& s, TableFormat f);

}  // namespace icl::analysis
