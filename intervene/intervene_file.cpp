// The interventions file (format kInterventionsFormat): its writer and reader, its tidy CSV and
// the console summary of a run.
#include "intervene/intervene.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"
#include "intervene/file_common.hpp"

namespace icl::intervene {

namespace {

// Dataset layouts of the file, named once.
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
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  data::WriteFormatAttrs(f, kInterventionsFormat);
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
  // "" = the probes file's ridge probes; else the subspace the probe was fitted within (its
  // basis in /within [H, r]) and probe_r2 is that probe's, on the calibration prompts.
  f.SetAttr("within", res.request.within_name);
  f.SetAttr("seed", static_cast<std::int64_t>(res.request.seed));
  f.SetAttr("pairs", static_cast<std::int64_t>(P));
  f.SetAttr("bootstrap_replicates", res.request.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", std::vector<std::int64_t>(res.layers.begin(), res.layers.end()));
  f.SetAttr("ks", std::vector<std::int64_t>(res.ks.begin(), res.ks.end()));
  f.SetAttr("controls", kInterventionControls);
  f.SetAttr("pairs_rule",
            std::string("pair p: A = prompt 2p, B = prompt 2p+1 of the stream 'seed' of "
                        "task_config; A's state after k examples is edited so that the ridge "
                        "probe reads B's value, and the prediction at A's x_{k+1} is compared"));
  f.SetAttr("slope_rule",
            std::string("observed on predicted through the origin, sum(o p) / sum(p^2); 95% "
                        "percentile bootstrap over pairs"));
  for (int i = 0; i < 4; ++i) {
    std::vector<double> v(C * L * K);
    for (hsize_t ci = 0; ci < C; ++ci)
      for (hsize_t cell = 0; cell < L * K; ++cell)
        v[ci * L * K + cell] = PerControl(res.cells[cell], i)(ci);
    h5::Dataset ds = f.CreateDataset<double>(kPerControl[i], {C, L, K}, {"control", "layer", "k"});
    ds.Write(v.data(), v.size());
    ds.SetAttr("description", std::string("[control, layer, k]"));
  }
  std::vector<double> r2(L * K), pairs(L * K * P), obs(C * L * K * P);
  for (hsize_t cell = 0; cell < L * K; ++cell)
    r2[cell] = res.cells[cell].probe_r2;
  f.CreateDataset<double>("probe_r2", {L, K}, {"layer", "k"}).Write(r2.data(), r2.size());
  for (int i = 0; i < 3; ++i) {
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      const arma::vec& v = PerPair(res.cells[cell], i);
      std::copy(v.begin(), v.end(), pairs.begin() + cell * P);
    }
    h5::Dataset ds = f.CreateDataset<double>(kPerPair[i], {L, K, P}, {"layer", "k", "pair"});
    ds.Write(pairs.data(), pairs.size());
    ds.SetAttr("description", std::string("[layer, k, pair]"));
  }
  for (hsize_t ci = 0; ci < C; ++ci)
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      const arma::vec o = res.cells[cell].observed.col(ci);
      std::copy(o.begin(), o.end(), obs.begin() + (ci * L * K + cell) * P);
    }
  h5::Dataset ds =
      f.CreateDataset<double>("observed", {C, L, K, P}, {"control", "layer", "k", "pair"});
  ds.Write(obs.data(), obs.size());
  ds.SetAttr("description", std::string("[control, layer, k, pair] change of the prediction"));
  if (!res.request.within.empty()) {
    const arma::mat rows = res.request.within.t();  // column-major r x H == row-major [H, r]
    h5::Dataset w = f.CreateDataset<double>(
        "within", {hsize_t(res.request.within.n_rows), hsize_t(res.request.within.n_cols)},
        {"state", "basis"});
    w.Write(rows.memptr(), rows.n_elem);
    w.SetAttr("description",
              std::string("[H, r] orthonormal basis of the subspace the probe was fitted in"));
  }
}

InterveneResult ReadInterventionsFile(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kInterventionsFormat);
  const std::string where = "'" + path + "'";
  InterveneResult res;
  res.checkpoint = f.GetString("checkpoint");
  res.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  res.probes = f.GetString("probes");
  res.probes_digest = f.GetString("probes_digest");
  res.request.target = f.GetString("target");
  res.task = data::TaskConfig::FromJson(f.GetString("task_config"), where + " task_config");
  try {  // a response read from the file is the file's fault, not a setting's
    res.response = ParseResponse(res.request.target, f.GetString("response"));
  } catch (const core::InputError& e) {
    throw core::InputError(where, "", "attribute '" + e.field() + "': " + e.text());
  }
  res.request.response = res.response.name;
  const std::string span = f.GetString("span");
  if (span != "probed" && span != "through-query")
    throw core::InputError(
        where, "",
        "attribute 'span' is '" + span.substr(0, 40) + "', expected probed or through-query");
  res.request.span = span == "probed" ? EditSpan::kProbed : EditSpan::kThroughQuery;
  const std::string metric = f.GetString("metric");
  if (metric != "covariance" && metric != "standardized")
    throw core::InputError(where, "",
                           "attribute 'metric' is '" + metric.substr(0, 40) +
                               "', expected covariance or standardized");
  res.request.metric = metric == "covariance" ? EditMetric::kCovariance : EditMetric::kStandardized;
  res.request.seed = static_cast<std::uint64_t>(f.GetInt("seed"));
  if (f.HasAttr("within")) res.request.within_name = f.GetString("within");  // basis: /within
  const std::int64_t pairs = f.GetInt("pairs");
  if (pairs < 2 || pairs > 1000000)
    throw core::InputError(
        where, "", "attribute 'pairs' is " + std::to_string(pairs) + ", expected 2..1000000");
  res.request.pairs = static_cast<int>(pairs);
  res.request.bootstrap = static_cast<int>(f.GetInt("bootstrap_replicates"));
  ReadLayersAndKs(f, where, res.task, res.layers, res.ks);
  if (f.GetStringList("controls") != kInterventionControls)
    throw core::InputError(where, "", "attribute 'controls' should be probe, random");
  const hsize_t L = res.layers.size(), K = res.ks.size(), C = kInterventionControls.size(),
                P = pairs;
  res.cells.resize(L * K);
  for (hsize_t cell = 0; cell < L * K; ++cell) {
    InterventionCell& c = res.cells[cell];
    c.layer = res.layers[cell / K];
    c.k = res.ks[cell % K];
    c.observed.set_size(P, C);
  }
  const auto read = [&](const char* name, const h5::Dims& dims) {
    return ReadFinite(f, where, name, dims);
  };
  for (int i = 0; i < 4; ++i) {
    const std::vector<double> v = read(kPerControl[i], {C, L, K});
    for (hsize_t cell = 0; cell < L * K; ++cell) {
      arma::vec& x = PerControl(res.cells[cell], i);
      x.set_size(C);
      for (hsize_t ci = 0; ci < C; ++ci)
        x(ci) = v[ci * L * K + cell];
    }
  }
  const std::vector<double> r2 = read("probe_r2", {L, K});
  for (hsize_t cell = 0; cell < L * K; ++cell)
    res.cells[cell].probe_r2 = r2[cell];
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> v = read(kPerPair[i], {L, K, P});
    for (hsize_t cell = 0; cell < L * K; ++cell)
      PerPair(res.cells[cell], i) = arma::vec(v.data() + cell * P, P);
  }
  const std::vector<double> obs = read("observed", {C, L, K, P});
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
