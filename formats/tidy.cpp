// Tidy CSVs from schemas (tidy.hpp).
#include "formats/tidy.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace icl::formats {

void WriteTidyCsv(std::ostream& os, const Schema& schema, const std::vector<std::string>& datasets,
                  const Sizes& sizes, const Coords& coords,
                  const std::vector<std::vector<double>>& values) {
  if (datasets.empty() || values.size() != datasets.size())
    throw std::logic_error("formats: a tidy CSV needs one vector of values per dataset");
  const DatasetSpec& first = schema.Dataset(datasets[0]);
  const std::vector<unsigned long long> dims = ShapeOf(first, sizes);
  std::size_t count = 1;
  for (const unsigned long long n : dims)
    count *= n;
  for (std::size_t i = 0; i < datasets.size(); ++i) {
    const DatasetSpec& d = schema.Dataset(datasets[i]);
    if (d.labels != first.labels || ShapeOf(d, sizes) != dims || values[i].size() != count)
      throw std::logic_error("formats: /" + d.path + " differs in shape from /" + first.path);
  }
  std::vector<std::string> columns = first.labels;
  if (columns.empty())
    for (std::size_t a = 0; a < dims.size(); ++a)
      columns.push_back("dim_" + std::to_string(a));
  for (std::size_t a = 0; a < dims.size(); ++a) {
    const auto it = coords.find(columns[a]);
    if (it != coords.end() && it->second.size() != dims[a])
      throw std::logic_error("formats: coordinates of '" + columns[a] + "' differ from its size");
  }
  for (const std::string& c : columns)
    os << c << ',';
  for (std::size_t i = 0; i < datasets.size(); ++i)
    os << datasets[i] << (i + 1 < datasets.size() ? "," : "\n");
  std::vector<unsigned long long> index(dims.size(), 0);
  for (std::size_t e = 0; e < count; ++e) {
    for (std::size_t a = 0; a < dims.size(); ++a) {
      const auto it = coords.find(columns[a]);
      os << (it == coords.end() ? std::to_string(index[a]) : it->second[index[a]]) << ',';
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double v = values[i][e];
      os << (std::isnan(v) ? std::string() : fmt::format("{:.6g}", v))
         << (i + 1 < values.size() ? "," : "\n");
    }
    for (std::size_t a = dims.size(); a-- > 0;) {  // row-major: the last index moves fastest
      if (++index[a] < dims[a]) break;
      index[a] = 0;
    }
  }
}

void WriteTidyCsv(std::ostream& os, const Reader& reader, const Schema& schema,
                  const std::vector<std::string>& datasets, const Sizes& sizes,
                  const Coords& coords) {
  std::vector<std::vector<double>> values;
  for (const std::string& d : datasets)
    values.push_back(reader.Read(d, sizes));
  WriteTidyCsv(os, schema, datasets, sizes, coords, values);
}

}  // namespace icl::formats
