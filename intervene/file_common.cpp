// Shared reading of intervene/'s files (file_common.hpp).
#include "intervene/file_common.hpp"

#include <cmath>
#include <set>

#include "core/errors.hpp"
#include "learners/model_config.hpp"

namespace icl::intervene {

void ReadLayersAndKs(const h5::File& f, const std::string& where, const data::TaskConfig& task,
                     std::vector<int>& layers, std::vector<int>& ks) {
  for (const std::int64_t l : f.GetIntList("layers")) {
    if (l < 0 || l > learners::kMaxLayers)
      throw core::InputError(where, "", "attribute 'layers' holds " + std::to_string(l));
    layers.push_back(static_cast<int>(l));
  }
  for (const std::int64_t k : f.GetIntList("ks")) {
    if (k < 1 || k >= task.n)
      throw core::InputError(where, "",
                             "attribute 'ks' holds " + std::to_string(k) + ", outside 1..n-1");
    ks.push_back(static_cast<int>(k));
  }
  if (layers.empty() || ks.empty())
    throw core::InputError(where, "", "attributes 'layers' and 'ks' must not be empty");
  if (std::set<int>(layers.begin(), layers.end()).size() != layers.size() ||
      std::set<int>(ks.begin(), ks.end()).size() != ks.size())
    throw core::InputError(where, "", "attribute 'layers' or 'ks' lists an entry twice");
}

std::vector<double> ReadFinite(const h5::File& f, const std::string& where, const char* name,
                               const h5::Dims& dims) {
  const h5::Dataset ds = f.OpenDataset(name);
  ds.ExpectDims(dims);
  std::vector<double> v = ds.ReadAll<double>();
  for (const double x : v)
    if (!std::isfinite(x))
      throw core::InputError(where, "", "/" + std::string(name) + " holds NaN or infinite values");
  return v;
}

}  // namespace icl::intervene
