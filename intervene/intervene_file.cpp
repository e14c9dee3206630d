// The interventions file (formats::InterventionsSchema()): its writer and reader through the
// formats layer, its tidy CSV and the console summary of a run.
#include "intervene/intervene.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "formats/reader.hpp"
#include "formats/schemas.hpp"
#include "formats/writer.hpp"
#include "intervene/file_common.hpp"

namespace icl::intervene {

namespace {

// Datasets of one layout (formats/interventions.cpp), in the order of the accessors below.
constexpr const char* kPerControl[] = {"slope", "slope_lo", "slope_hi", "correlation"};
constexpr const char* kPerPair[] = {"predicted", "edit_norm", "state_norm"};

// One accessor for the writer (const cells) and the reader (cells being filled).
template <typename Cell>
auto& PerControl(Cell& c, int i) {
  return i == 0 ? c.slope : i == 1 ? c.slope_lo : i == 2 ? c.slope_hi : c.correlation;
}
template <typename Cell>
auto& PerPair(Cell& c, int i) {
  return i == 0 ? c.predicted : i == 1 ? c.edit_norm : c.state_norm;
}

}  // namespace

void WriteInterventionsFile(const std::string& path, const InterveneResult& res) {
  const hsize_t L = res.layers.size(), K = res.ks.size(), C = kInterventionControls.size(),
                P = res.request.pairs;
  formats::Writer f(path, formats::InterventionsSchema());
  f.SetAttr("checkpoint", res.checkpoint);
  f.SetAttr("checkpoint_sha256", res.checkpoint_sha256);
  f.SetAttr("probes", res.probes);
  f.SetAttr("probes_digest", res.probes_digest);
  f.SetAttr("target", res.request.target);
  if (!res.target_learner.empty()) f.SetAttr("target_learner", res.target_learner);
  f.SetAttr("response", res.response.name);
  f.SetAttr("span", EditSpanName(res.request.span));
  f.SetAttr("metric", EditMetricName(res.request.metric));
  f.SetAttr("calibration_prompts", res.request.calibration_prompts);
  f.SetAttr("within", res.request.within_name);
  f.SetAttr("seed", static_cast<std::int64_t>(res.request.seed));
  f.SetAttr("pairs", static_cast<std::int64_t>(P));
  f.SetAttr("bootstrap_replicates", res.request.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", res.layers);
  f.SetAttr("ks", res.ks);
  f.SetAttr("controls", kInterventionControls);
  const formats::Sizes sizes = {{"control", C}, {"layer", L}, {"k", K}, {"pair", P}};
  for (int i = 0; i < 4; ++i) {
    std::vector<double> v(C * L * K);
    for (hsize_t ci = 0; ci < C; ++ci)
      for (hsize_t cell = 0; cell < L * K; ++cell)
        v[ci * L * K + cell] = PerControl(res.cells[cell], i)(ci);
    f.Write(kPerControl[i], sizes, v);
  }
  std::vector<double> r2(L * K), pairs(L * K * P), obs(C * L * K * P);
  for (hsize_t cell = 0; cell < L * K; ++cell)
    r2[cell] = res.cells[cell].probe_r2;
  f.Write("probe_r2", sizes, r2);
  for (int i = 0; i < 3; ++i) {
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      const arma::vec& v = PerPair(res.cells[cell], i);
      std::copy(v.begin(), v.end(), pairs.begin() + cell * P);
    }
    f.Write(kPerPair[i], sizes, pairs);
  }
  for (hsize_t ci = 0; ci < C; ++ci)
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      const arma::vec o = res.cells[cell].observed.col(ci);
      std::copy(o.begin(), o.end(), obs.begin() + (ci * L * K + cell) * P);
    }
  f.Write("observed", sizes, obs);
  if (!res.request.within.empty()) {
    const arma::mat rows = res.request.within.t();  // column-major r x H == row-major [H, r]
    f.Write("within", {{"H", res.request.within.n_rows}, {"r", res.request.within.n_cols}},
            rows.memptr(), rows.n_elem);
  }
  f.Close();
}

InterveneResult ReadInterventionsFile(const std::string& path) {
  const formats::Reader f(path, formats::InterventionsSchema());
  const std::string& where = f.where();
  InterveneResult res;
  res.checkpoint = f.String("checkpoint");
  res.checkpoint_sha256 = f.String("checkpoint_sha256");
  res.probes = f.String("probes");
  res.probes_digest = f.String("probes_digest");
  res.request.target = f.String("target");
  res.task = data::TaskConfig::FromJson(f.String("task_config"), where + " task_config");
  try {  // a response read from the file is the file's fault, not a setting's
    res.response = ParseResponse(res.request.target, f.String("response"));
  } catch (const core::InputError& e) {
    throw core::InputError(where, "", "attribute '" + e.field() + "': " + e.text());
  }
  res.request.response = res.response.name;
  const std::string span = f.String("span");
  if (span != "probed" && span != "through-query")
    throw core::InputError(
        where, "",
        "attribute 'span' is '" + span.substr(0, 40) + "', expected probed or through-query");
  res.request.span = span == "probed" ? EditSpan::kProbed : EditSpan::kThroughQuery;
  const std::string metric = f.String("metric");
  if (metric != "covariance" && metric != "standardized")
    throw core::InputError(where, "",
                           "attribute 'metric' is '" + metric.substr(0, 40) +
                               "', expected covariance or standardized");
  res.request.metric = metric == "covariance" ? EditMetric::kCovariance : EditMetric::kStandardized;
  res.request.seed = static_cast<std::uint64_t>(f.Int("seed"));
  if (f.HasAttr("within")) res.request.within_name = f.String("within");  // basis: /within
  const std::int64_t pairs = f.Int("pairs");
  if (pairs < 2 || pairs > 1000000)
    throw core::InputError(
        where, "", "attribute 'pairs' is " + std::to_string(pairs) + ", expected 2..1000000");
  res.request.pairs = static_cast<int>(pairs);
  res.request.bootstrap = static_cast<int>(f.Int("bootstrap_replicates"));
  ReadLayersAndKs(f, res.task, res.layers, res.ks);
  if (f.StringList("controls") != kInterventionControls)
    throw core::InputError(where, "", "attribute 'controls' should be probe, random");
  const hsize_t L = res.layers.size(), K = res.ks.size(), C = kInterventionControls.size(),
                P = pairs;
  const formats::Sizes sizes = {{"control", C}, {"layer", L}, {"k", K}, {"pair", P}};
  res.cells.resize(L * K);
  for (hsize_t cell = 0; cell < L * K; ++cell) {
    InterventionCell& c = res.cells[cell];
    c.layer = res.layers[cell / K];
    c.k = res.ks[cell % K];
    c.observed.set_size(P, C);
  }
  for (int i = 0; i < 4; ++i) {
    const std::vector<double> v = f.Read(kPerControl[i], sizes);
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      arma::vec& x = PerControl(res.cells[cell], i);
      x.set_size(C);
      for (hsize_t ci = 0; ci < C; ++ci)
        x(ci) = v[ci * L * K + cell];
    }
  }
  const std::vector<double> r2 = f.Read("probe_r2", sizes);
  for (hsize_t cell = 0; cell < L * K; ++cell)
    res.cells[cell].probe_r2 = r2[cell];
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> v = f.Read(kPerPair[i], sizes);
    for (hsize_t cell = 0; cell < L * K; ++cell)
      PerPair(res.cells[cell], i) = arma::vec(v.data() + cell * P, P);
  }
  const std::vector<double> obs = f.Read("observed", sizes);
  for (hsize_t ci = 0; ci < C; ++ci)
    for (hsize_t cell = 0; cell < L * K; ++cell)
      res.cells[cell].observed.col(ci) = arma::vec(obs.data() + (ci * L * K + cell) * P, P);
  return res;
}

void WriteInterventionsCsv(std::ostream& os, const InterveneResult& res) {
  os << "target,response,span,metric,layer,k,control,pairs,slope,slope_lo,slope_hi,correlation,"
        "probe_r2,mean_abs_predicted,mean_abs_observed,median_edit_rel\n";
  for (const auto& c : res.cells)
    for (std::size_t ci = 0; ci < kInterventionControls.size(); ++ci)
      os << fmt::format(
          "{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n",
          res.request.target, res.response.name, EditSpanName(res.request.span),
          EditMetricName(res.request.metric), c.layer, c.k, kInterventionControls[ci],
          c.predicted.n_elem, c.slope(ci), c.slope_lo(ci), c.slope_hi(ci), c.correlation(ci),
          c.probe_r2, arma::mean(arma::abs(c.predicted)), arma::mean(arma::abs(c.observed.col(ci))),
          arma::median(c.edit_norm / arma::clamp(c.state_norm, 1e-300, arma::datum::inf)));
}

void PrintInterventionSummary(std::ostream& os, const InterveneResult& res) {
  os << fmt::format(
      "intervene: target {}, response {}, edits at {} ({} metric), {} pairs; slope of the observed "
      "on the "
      "predicted change of the prediction (1 = used as the algorithm uses it, 0 = not used), "
      "95% bootstrap intervals over pairs\n",
      res.request.target, res.response.name, EditSpanName(res.request.span),
      EditMetricName(res.request.metric), res.request.pairs);
  if (!res.request.within_name.empty())
    os << fmt::format(
        "  the probe was fitted within {} (probe R2: on the calibration prompts), "
        "and every edit stays inside it\n",
        res.request.within_name);
  for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
    os << fmt::format(
        "k = {}\n  layer  probe R2   slope (probe edit)          slope (random)         |dh|/|h|\n",
        res.ks[ki]);
    for (std::size_t li = 0; li < res.layers.size(); ++li) {
      const InterventionCell& c = res.Cell(li, ki);
      os << fmt::format(
          "  {:5d}  {:8.3f}   {:7.3f} [{:7.3f}, {:7.3f}]   {:7.3f} [{:7.3f}, {:7.3f}]   {:.3g}\n",
          c.layer, c.probe_r2, c.slope(0), c.slope_lo(0), c.slope_hi(0), c.slope(1), c.slope_lo(1),
          c.slope_hi(1),
          arma::median(c.edit_norm / arma::clamp(c.state_norm, 1e-300, arma::datum::inf)));
    }
  }
}

}  // namespace icl::intervene
