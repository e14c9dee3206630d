// Text the formats layer's messages and pages share.
#include "formats/text.hpp"

namespace icl::formats {

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i ? ", " : "") + items[i];
  return out;
}

std::string DimsText(const std::vector<unsigned long long>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace icl::formats
