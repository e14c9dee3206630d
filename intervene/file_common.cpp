// Shared reading of intervene/'s files (file_common.hpp).
#include "intervene/file_common.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/errors.hpp"
#include "learners/model_config.hpp"

namespace icl::intervene {

void ResolveLayersAndKs(const std::string& command, const learners::ModelConfig& mc,
                        const data::TaskConfig& task, const std::vector<int>& layers_in,
                        const std::vector<int>& ks_in, std::vector<int>& layers,
                        std::vector<int>& ks, int k_first) {
  if (task.n > mc.n_max || task.d != mc.d)
    throw core::InputError(command, "checkpoint",
                           fmt::format("prompts of d = {}, n = {} do not fit the model (d = {}, "
                                       "n_max = {})",
                                       task.d, task.n, mc.d, mc.n_max));
  layers = layers_in;
  if (layers.empty())
    for (int l = 0; l <= mc.layers; ++l)
      layers.push_back(l);
  for (const int l : layers)
    if (l < 0 || l > mc.layers)
      throw core::InputError(command, "layers",
                             fmt::format("state {} is outside 0..{} (the model has {} blocks)", l,
                                         mc.layers, mc.layers));
  ks = ks_in;
  if (ks.empty())
    for (int k = k_first; k < task.n; ++k)
      ks.push_back(k);
  for (const int k : ks)
    if (k < 1 || k >= task.n)
      throw core::InputError(
          command, "k",
          fmt::format("{} is outside 1..{} (the query x_(k+1) of an n = {} prompt must exist)", k,
                      task.n - 1, task.n));
}

void ReadLayersAndKs(const formats::Reader& f, const data::TaskConfig& task,
                     std::vector<int>& layers, std::vector<int>& ks) {
  const std::string& where = f.where();
  for (const std::int64_t l : f.IntList("layers")) {
    if (l < 0 || l > learners::kMaxLayers)
      throw core::InputError(where, "", "attribute 'layers' holds " + std::to_string(l));
    layers.push_back(static_cast<int>(l));
  }
  for (const std::int64_t k : f.IntList("ks")) {
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

bool NoSpread(double den, double scale, double terms) {
  return !(den > 4.0 * terms * arma::datum::eps / 2.0 * scale);  // eps / 2 = u = 2^-53
}

arma::vec SpreadRatio(const arma::vec& num, const arma::vec& den, const arma::vec& scale,
                      double terms) {
  arma::vec r(num.n_elem);
  for (arma::uword b = 0; b < num.n_elem; ++b)
    r(b) = NoSpread(den(b), scale(b), terms) ? arma::datum::nan : num(b) / den(b);
  return r;
}

std::string IntervalText(double lo, double hi, int width, int precision) {
  if (std::isnan(lo) || std::isnan(hi))
    return fmt::format("{:<{}}", "undefined", 2 * width + 4);  // "[" + lo + ", " + hi + "]"
  return fmt::format("[{:{}.{}f}, {:{}.{}f}]", lo, width, precision, hi, width, precision);
}

std::string CsvValue(double v) {
  return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v);
}

}  // namespace icl::intervene
