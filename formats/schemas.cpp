// What the schemas of schemas.hpp share: the list of them and the summary
// dataset whose interval bounds may be undefined.
#include "formats/schemas.hpp"

#include <string>

namespace icl::formats {

std::vector<const Schema*> AllSchemas() {
  return {&InterventionsSchema(), &SwapsSchema(), &ErasureSchema(), &DasSchema(), &TraceSchema()};
}

DatasetSpec SummaryData(const std::string& name, const std::vector<std::string>& shape,
                        const std::vector<std::string>& labels, const std::string& description,
                        const std::string& when) {
  DatasetSpec d = Data(name, shape, labels, description);
  d.when = when;
  const bool bound = name.size() > 3 && (name.compare(name.size() - 3, 3, "_lo") == 0 ||
                                         name.compare(name.size() - 3, 3, "_hi") == 0);
  if (bound) {
    d.values = Values::kFiniteOrNaN;
    d.attrs = {{"undefined", kUndefinedBound}};
  }
  return d;
}

}  // namespace icl::formats
