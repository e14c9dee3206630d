// The results of a probing run as the Python module reads them (probe_results.hpp): from a
// probes file or from a run in memory, through the same analysis functions as the CLI.
#include "python/probe_results.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "analysis/report.hpp"
#include "core/errors.hpp"
#include "core/names.hpp"
#include "python/arrays.hpp"

namespace icl::python {

using icl::core::InputError;

py::array_t<double> Probes::Metric(const std::string& target, const std::string& probe,
                                   const std::string& source, const std::string& metric) const {
  const arma::cube* c = r_.Find(target, probe, source, metric);
  if (!c)
    throw InputError("'" + r_.path + "'", "",
                     "has no metric " + target + "/" + probe + "/" + source + "/" + metric);
  py::array_t<double> a({py::ssize_t(c->n_slices), py::ssize_t(c->n_cols), py::ssize_t(c->n_rows)});
  std::memcpy(a.mutable_data(), c->memptr(), sizeof(double) * c->n_elem);
  return a;
}

py::list Probes::Onsets(int k, double threshold, double relative, double margin) const {
  const icl::analysis::OnsetRule rule = Rule(threshold, relative, margin);
  if (std::find(r_.ks.begin(), r_.ks.end(), k) == r_.ks.end())
    throw InputError("'" + r_.path + "'", "k", "k=" + std::to_string(k) + " was not probed");
  return OnsetList(icl::analysis::FindOnsets(r_, k, rule));
}

py::dict Probes::Ridge(const std::string& target, int layer, int k, int seed,
                       const std::string& source) const {
  const icl::probes::RidgeReadout w =
      icl::probes::ReadRidgeReadout(r_, target, layer, k, seed, source);
  py::dict d;
  d["weights"] = ToNumpy(arma::mat(w.weights.t()));
  d["intercept"] = ToNumpy(w.intercept);
  d["feature_scale"] = ToNumpy(w.feature_scale);
  d["lambda"] = w.lambda;
  return d;
}

icl::analysis::OnsetRule Probes::Rule(double threshold, double relative, double margin) {
  icl::analysis::OnsetRule rule;
  rule.threshold = threshold, rule.relative = relative, rule.margin = margin;
  rule.Validate();
  return rule;
}

py::list Probes::OnsetList(const std::vector<icl::analysis::Onset>& onsets) {
  py::list out;
  auto score = [](const icl::analysis::Scorer::Score& s) {
    return py::make_tuple(s.mean, s.lo, s.hi);
  };
  for (const auto& o : onsets) {
    py::dict d;
    d["target"] = o.target, d["probe"] = o.probe, d["k"] = o.k;
    d["layer"] = o.layer >= 0 ? py::object(py::int_(o.layer)) : py::object(py::none());
    d["threshold"] = o.threshold, d["best_layer"] = o.best_layer, d["best_r2"] = o.best_r2;
    py::dict controls, margins;
    for (const auto& [name, layer] : o.controls)
      controls[py::str(name)] = layer >= 0 ? py::object(py::int_(layer)) : py::object(py::none());
    for (const auto& [name, sc] : o.margins)
      margins[py::str(name)] = score(sc);
    d["controls"] = controls;
    d["intervals"] = o.intervals;
    if (o.intervals) {
      d["best"] = score(o.best);
      d["at_onset"] = score(o.at_onset);
      d["margins"] = margins;
      d["indistinguishable"] = o.indistinguishable;
    }
    out.append(d);
  }
  return out;
}

// Learners of one configuration, each a Probes (file or run) under a name: the family report of
// `iclprobe report` with several probes files (R2 by layer over the learners, as CSV text; each
// learner's onset and whether they agree), and each learner's onsets.
py::dict FamilyReport(const std::vector<std::pair<std::string, const Probes*>>& learners, int k,
                      double threshold, double relative, double margin) {
  const icl::analysis::OnsetRule rule = Probes::Rule(threshold, relative, margin);
  std::vector<icl::probes::ProbeResults> family;
  for (const auto& [name, p] : learners) {
    if (!icl::core::IsPlainName(name) || name.find('.') != std::string::npos)
      throw InputError(
          "iclprobe", "results",
          "learner name '" + name.substr(0, 40) + "' is not a plain name (letters, digits, _ -)");
    family.push_back(p->results());
    family.back().path = name;  // what names the learner in the tables
  }
  std::ostringstream table, summary;
  icl::analysis::WriteFamilyReport(table, summary, family, k, rule,
                                   icl::analysis::TableFormat::kCsv);
  py::dict out;
  out["csv"] = table.str();
  out["summary"] = summary.str();
  py::dict onsets;
  for (const auto& r : family)
    onsets[py::str(r.path)] = Probes::OnsetList(icl::analysis::FindOnsets(r, k, rule));
  out["onsets"] = onsets;
  return out;
}

}  // namespace icl::python
