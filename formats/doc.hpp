// The documentation page of a format, generated from its schema
// (docs/formats/<format>.md): every attribute and dataset with its shape,
// dimension labels, values and fixed attributes. A test compares the committed
// pages with these and rewrites them on request.
#pragma once

#include <string>

#include "formats/schema.hpp"

namespace icl::formats {

// The page in Markdown.
std::string DocPage(const Schema& schema);
// docs/formats/<format>.md below `root` (the source tree).
std::string DocPagePath(const std::string& root, const Schema& schema);
// Writes DocPage(schema) to DocPagePath(root, schema); throws
// std::runtime_error when it cannot.
void WriteDocPage(const std::string& root, const Schema& schema);

}  // namespace icl::formats
