// What the runs and files of intervene/ (interventions, swaps, erasure, DAS) share: the layers
// and k of a run, resolved against the model or read from a file's attributes, and the
// bootstrap ratios and their text. Internal to intervene/; the schemas are in formats/.
#pragma once

#include <armadillo>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "formats/reader.hpp"
#include "learners/model_config.hpp"

namespace icl::intervene {

// Armadillo's column-major matrices and cubes as the row-major blocks the result files store:
// mat (rows L, cols M) <-> [L, M] row-major.
inline std::vector<double> RowMajor(const arma::mat& m) {
  const arma::mat t = m.t();
  return std::vector<double>(t.memptr(), t.memptr() + t.n_elem);
}

// cube (rows L, cols M, slices X) <-> [L, M, X] row-major.
inline std::vector<double> RowMajor(const arma::cube& c) {
  std::vector<double> v;
  v.reserve(c.n_elem);
  for (arma::uword i = 0; i < c.n_rows; ++i)
    for (arma::uword j = 0; j < c.n_cols; ++j)
      for (arma::uword s = 0; s < c.n_slices; ++s)
        v.push_back(c(i, j, s));
  return v;
}

// The states and k of a run: `layers_in` (every state 0..L when empty) and `ks_in` (k_first..n-1
// when empty), each checked against the model (a state it lacks) and the task (the query
// x_(k+1) must exist), after checking that the task's prompts fit the model. Throws
// core::InputError naming `command` and the setting ("checkpoint", "layers", "k").
void ResolveLayersAndKs(const std::string& command, const learners::ModelConfig& mc,
                        const data::TaskConfig& task, const std::vector<int>& layers_in,
                        const std::vector<int>& ks_in, std::vector<int>& layers,
                        std::vector<int>& ks, int k_first = 1);

// The attributes 'layers' (each in 0..kMaxLayers) and 'ks' (each in 1..n-1 of `task`): non-empty,
// no entry twice. Throws core::InputError naming the file.
void ReadLayersAndKs(const formats::Reader& f, const data::TaskConfig& task,
                     std::vector<int>& layers, std::vector<int>& ks);

// Bootstrap replicates of num / den, where den is the spread of a resample (a mean of squares,
// or a mean of squares minus the square of a mean) and `scale` the mean of squares it was computed
// from, each mean a sum of `terms` values: NaN (undefined) where den <= 4 terms u scale (u =
// 2^-53), the bound on the rounding of those sums and of the difference. A resample of few pairs
// that drew one pair only (or pairs of equal values) has no spread, and the ratio of its rounding
// would read as a number such as -1e297. probes::PercentileInterval over replicates holding a NaN
// is undefined (NaN) itself.
arma::vec SpreadRatio(const arma::vec& num, const arma::vec& den, const arma::vec& scale,
                      double terms);
// True when a spread `den` computed from the mean of squares `scale` over `terms` values is zero
// to that rounding (the same test for one value).
bool NoSpread(double den, double scale, double terms);

// "[lo, hi]", each bound printed with `width` and `precision` as {:W.Pf}, or "undefined" padded
// to the same width when a bound is NaN.
std::string IntervalText(double lo, double hi, int width, int precision);
// A CSV cell: the value as {:.6g}, or empty when it is NaN (undefined).
std::string CsvValue(double v);

}  // namespace icl::intervene
