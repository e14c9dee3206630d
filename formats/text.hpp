// Text the formats layer's messages and pages share: a list joined with commas, a shape in
// brackets.
#pragma once

#include <string>
#include <vector>

namespace icl::formats {

// "a, b, c"
std::string Joined(const std::vector<std::string>& items);
// "[4, 12, 64]"
std::string DimsText(const std::vector<unsigned long long>& dims);

}  // namespace icl::formats
