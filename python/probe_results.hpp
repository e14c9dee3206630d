// The results of a probing run as the Python module reads them: a probes file's contents (read,
// or a run's in memory) and the family report over several learners. Internal to python/.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
// In every file of the module: a file without it would instantiate pybind11's generic caster for
// std::vector and the rest, and the linker would keep one of the two (an ODR violation that shows
// as "Unregistered type" at run time).
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "analysis/report.hpp"
#include "probes/probes_file.hpp"

namespace icl::python {

namespace py = pybind11;

// A probes file's contents, from a file (ReadProbesFile) or from a run in memory
// (ProbeResultsInMemory): the same object, so every analysis reads both alike.
class Probes {
 public:
  explicit Probes(icl::probes::ProbeResults r) : r_(std::move(r)) {}
  const icl::probes::ProbeResults& results() const { return r_; }
  // /metrics/<target>/<probe>/<source>/<metric> as [L, K, S] (cube (seed, k, layer) column-major
  // is that row-major).
  py::array_t<double> Metric(const std::string& target, const std::string& probe,
                             const std::string& source, const std::string& metric) const;
  // The onset of every (target, probe) at k under `rule` (analysis::FindOnsets, what `iclprobe
  // report` prints).
  py::list Onsets(int k, double threshold, double relative, double margin) const;
  py::dict Ridge(const std::string& target, int layer, int k, int seed,
                 const std::string& source) const;

  static icl::analysis::OnsetRule Rule(double threshold, double relative, double margin);
  static py::list OnsetList(const std::vector<icl::analysis::Onset>& onsets);

 private:
  icl::probes::ProbeResults r_;
};

// Learners of one configuration, each a Probes (file or run) under a name: the family report of
// `iclprobe report` with several probes files (R2 by layer over the learners, as CSV text; each
// learner's onset and whether they agree), and each learner's onsets.
py::dict FamilyReport(const std::vector<std::pair<std::string, const Probes*>>& learners, int k,
                      double threshold, double relative, double margin);

}  // namespace icl::python
