// probes.h5: the checked reader, and the ridge readout of a file it accepted.
#include "probes/probes_file.hpp"
#include "probes/probes_schema.hpp"

#include "core/errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/hdf5.hpp"
#include "core/json.hpp"
#include "core/names.hpp"
#include "data/prompt_io.hpp"
#include "data/task.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"
#include "learners/model_config.hpp"
#include "probes/uncertainty.hpp"

namespace icl::probes {

const arma::cube* ProbeResults::Find(const std::string& t, const std::string& p,
                                     const std::string& s, const std::string& m) const {
  const auto it = metric.find(t + "/" + p + "/" + s + "/" + m);
  return it == metric.end() ? nullptr : &it->second;
}

const arma::mat* ProbeResults::Sse(const std::string& t, const std::string& p, const std::string& s,
                                   arma::uword li, arma::uword ki) const {
  const auto it = sse.find(t + "/" + p + "/" + s);
  if (it == sse.end()) return nullptr;
  return &it->second.at(li * ks.size() + ki);
}

const arma::mat* ProbeResults::Sst(const std::string& t, arma::uword ki) const {
  const auto it = sst.find(t);
  return it == sst.end() ? nullptr : &it->second.at(ki);
}

namespace {

// Names read from the file end up in file names and plot scripts: they must be plain.
const std::string& CheckName(const std::string& name, const std::string& path,
                             const std::string& where) {
  if (!core::IsPlainName(name))
    throw core::InputError("'" + path + "'", "",
                           where + " name '" + name.substr(0, 80) +
                               "' is not a plain name (1-64 letters, digits, _ . -)");
  return name;
}

// /errors: per-prompt squared errors, shape-checked against the metrics and checked to be
// finite and non-negative, so that every bootstrap replicate is a number.
void ReadErrors(const h5::File& f, ProbeResults& r) {
  const std::string where = "'" + r.path + "'";
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds;
  if (f.HasAttr("bootstrap_replicates")) {
    const auto b = f.GetInt("bootstrap_replicates");
    if (b < 100 || b > 100000)
      throw core::InputError(
          where, "",
          "attribute 'bootstrap_replicates' is " + std::to_string(b) + ", expected 100..100000");
    r.bootstrap = static_cast<int>(b);
    r.bootstrap_seed = static_cast<std::uint64_t>(f.GetInt("bootstrap_seed"));
  }
  auto read = [&](const std::string& name, std::vector<hsize_t> dims_prefix) {
    const h5::Dataset ds = f.OpenDataset(name);
    auto dims = ds.dims();
    if (dims.size() != dims_prefix.size() + 1 ||
        !std::equal(dims_prefix.begin(), dims_prefix.end(), dims.begin()) || dims.back() < 1 ||
        dims.back() > 100000000)
      throw core::InputError(where, "",
                             "/" + name + " has the wrong shape; expected [" +
                                 fmt::format("{}", fmt::join(dims_prefix, ", ")) +
                                 ", test prompts]");
    if (r.n_test == 0) r.n_test = dims.back();
    if (dims.back() != r.n_test)
      throw core::InputError(where, "",
                             "/" + name + " has " + std::to_string(dims.back()) +
                                 " test prompts, other errors " + std::to_string(r.n_test));
    std::vector<double> raw = ds.ReadAll<double>();
    for (double v : raw)
      if (!(v >= 0) || !std::isfinite(v))
        throw core::InputError(where, "",
                               "/" + name + " holds a negative, NaN or infinite squared error");
    return raw;
  };
  for (const auto& t : f.OpenGroup("errors").Members()) {
    if (std::find(r.targets.begin(), r.targets.end(), t) == r.targets.end())
      throw core::InputError(where, "",
                             "/errors/" + t.substr(0, 80) + " is not a target of /metrics");
    const auto sst = read("errors/" + t + "/sst", {K, S});
    std::vector<arma::mat> per_k;
    for (hsize_t ki = 0; ki < K; ++ki) {
      arma::mat m(r.n_test, S);
      for (hsize_t s = 0; s < S; ++s)
        for (hsize_t i = 0; i < r.n_test; ++i)
          m(i, s) = sst[(ki * S + s) * r.n_test + i];
      if (!(arma::min(arma::sum(m, 0)) > 0))
        throw core::InputError(where, "",
                               "/errors/" + t + "/sst sums to 0 on a test split; R2 is undefined");
      per_k.push_back(std::move(m));
    }
    r.sst[t] = std::move(per_k);
    for (const auto& p : f.OpenGroup("errors/" + t).Members()) {
      if (p == "sst") continue;
      if (std::find(r.probes.begin(), r.probes.end(), p) == r.probes.end())
        throw core::InputError(
            where, "", "/errors/" + t + "/" + p.substr(0, 80) + " is not a probe of /metrics");
      for (const auto& s : f.OpenGroup("errors/" + t + "/" + p).Members()) {
        if (!r.Find(t, p, s, "r2"))
          throw core::InputError(
              where, "",
              "/errors/" + t + "/" + p + "/" + s.substr(0, 80) + " has no /metrics counterpart");
        const auto sse = read("errors/" + t + "/" + p + "/" + s + "/sse", {L, K, S});
        std::vector<arma::mat> cells;
        for (hsize_t cell = 0; cell < L * K; ++cell) {
          arma::mat m(r.n_test, S);
          for (hsize_t s2 = 0; s2 < S; ++s2)
            for (hsize_t i = 0; i < r.n_test; ++i)
              m(i, s2) = sse[(cell * S + s2) * r.n_test + i];
          cells.push_back(std::move(m));
        }
        r.sse[t + "/" + p + "/" + s] = std::move(cells);
      }
    }
  }
}

// The root attributes: the task, the layers, k and seeds probed, the sources.
void ReadLayout(const h5::File& f, ProbeResults& r) {
  const std::string& path = r.path;
  const std::string where = "'" + path + "'";
  const auto task = data::TaskConfig::FromJson(f.GetString("task_config"), where + " task_config");
  r.d = task.d;
  r.n = task.n;
  auto ints = [&](const std::string& attr, std::int64_t lo, std::int64_t hi) {
    std::vector<int> out;
    for (const std::int64_t v : f.GetIntList(attr)) {
      if (v < lo || v > hi)
        throw core::InputError(where, "",
                               "attribute '" + attr + "' holds " + std::to_string(v) +
                                   ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
      out.push_back(static_cast<int>(v));
    }
    return out;
  };
  r.layers = ints("layers", 0, learners::kMaxLayers);
  r.ks = ints("ks", 1, r.n);
  const std::int64_t seeds = f.GetInt("seeds");
  if (seeds < 1 || seeds > 100000)
    throw core::InputError(
        where, "", "attribute 'seeds' is " + std::to_string(seeds) + ", expected 1..100000");
  r.seeds = static_cast<int>(seeds);
  r.sources = f.GetStringList("sources");
  if (r.layers.empty() || r.ks.empty() || r.sources.empty() || r.sources[0] != "model")
    throw core::InputError(where, "",
                           "expected non-empty layers, ks and sources starting "
                           "with 'model'");
  for (const auto* list : {&r.layers, &r.ks})
    if (std::set<int>(list->begin(), list->end()).size() != list->size())
      throw core::InputError(where, "", "a layer or k is listed twice");
  for (const auto& s : r.sources)
    CheckName(s, path, "source");
}

// /metrics/<target>/<probe>/<source>/<metric>: [layer, k, seed], every value a number.
void ReadMetrics(const h5::File& f, ProbeResults& r) {
  const std::string& path = r.path;
  const std::string where = "'" + path + "'";
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds;
  if (!f.Exists("metrics")) throw core::InputError(where, "", "no /metrics group");
  for (const auto& t : f.OpenGroup("metrics").Members()) {
    r.targets.push_back(CheckName(t, path, "target"));
    for (const auto& p : f.OpenGroup("metrics/" + t).Members()) {
      if (p != "ridge" && p != "linear" && p != "mlp")
        throw core::InputError(where, "",
                               "unknown probe family '" + p.substr(0, 80) + "' under /metrics/" +
                                   t + " (expected ridge, linear, mlp)");
      if (std::find(r.probes.begin(), r.probes.end(), p) == r.probes.end()) r.probes.push_back(p);
      for (const auto& s : f.OpenGroup("metrics/" + t + "/" + p).Members()) {
        if (std::find(r.sources.begin(), r.sources.end(), s) == r.sources.end())
          throw core::InputError(where, "",
                                 "/metrics/" + t + "/" + p + " has source '" + s.substr(0, 80) +
                                     "' that is not in the 'sources' attribute");
        for (const char* m : schema::kMetricNames) {
          const std::string name = "metrics/" + t + "/" + p + "/" + s + "/" + m;
          if (std::string(m).find('_') != std::string::npos && !f.Exists(name)) continue;
          const h5::Dataset ds = f.OpenDataset(name);
          ds.ExpectDims({L, K, S});
          arma::cube c(S, K, L);  // column-major (seed, k, layer) == row-major [L, K, S]
          ds.Read(c.memptr(), c.n_elem);
          // A NaN would silently fail or pass every comparison of the onset rule.
          if (!c.is_finite())
            throw core::InputError(where, "",
                                   "/" + name +
                                       " holds NaN or infinite values; every probe score must "
                                       "be a number");
          r.metric[t + "/" + p + "/" + s + "/" + m] = std::move(c);
        }
      }
    }
  }
  if (r.targets.empty()) throw core::InputError(where, "", "/metrics holds no target");
}

// The optional attributes: the model (its layers bound the probed states), the checkpoint and
// the extract's ridge lambda.
void ReadProvenance(const h5::File& f, ProbeResults& r) {
  const std::string where = "'" + r.path + "'";
  if (f.HasAttr("model_config")) {
    r.model_config = f.GetString("model_config");
    // The probed states exist in the model: 0 (embedding) .. L (where the file says L).
    const auto mc = nlohmann::json::parse(r.model_config, nullptr, /*allow_exceptions=*/false);
    const std::int64_t L =
        mc.is_object() && mc.contains("layers") && mc["layers"].is_number_integer()
            ? mc["layers"].get<std::int64_t>()
            : learners::kMaxLayers;
    for (const int l : r.layers)
      if (l > L)
        throw core::InputError(where, "",
                               "attribute 'layers' lists layer " + std::to_string(l) +
                                   " of a model with states 0.." + std::to_string(L));
  }
  if (f.HasAttr("checkpoint_sha256")) r.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  if (f.HasAttr("ridge_lambda")) {
    r.ridge_lambda = f.GetDouble("ridge_lambda");
    if (!(r.ridge_lambda >= 0) || !std::isfinite(r.ridge_lambda))
      throw core::InputError(where, "", "attribute 'ridge_lambda' must be a finite lambda >= 0");
  }
  r.task_config = f.GetString("task_config");
  if (f.HasAttr("probe_config")) {
    const auto pc =
        nlohmann::json::parse(f.GetString("probe_config"), nullptr, /*allow_exceptions=*/false);
    if (pc.is_object() && pc.contains("pooling") && pc["pooling"].is_string()) {
      r.pooling = pc["pooling"].get<std::string>();
      if (r.pooling != "attention" && r.pooling != "position")
        throw core::InputError(
            where, "", "probe_config names an unknown pooling '" + r.pooling.substr(0, 40) + "'");
    }
  }
  if (f.HasAttr("learner_targets")) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f.GetString("learner_targets"));
    } catch (const nlohmann::json::exception&) {
      j = nullptr;
    }
    if (!j.is_object())
      throw core::InputError(where, "", "attribute 'learner_targets' should be a JSON object");
    for (const auto& [name, spec] : j.items()) {
      if (!spec.is_string() || name != extract::schema::LearnerTargetName(spec.get<std::string>()))
        throw core::InputError(where, "",
                               "attribute 'learner_targets' maps '" + name.substr(0, 80) +
                                   "' to something other than the learner spec it names");
      r.learner_targets[name] = spec.get<std::string>();
    }
  }
}

// /alpha/<target>/<probe>/<source>: pooling weights [layer, k, seed, position], averaged over
// seeds.
void ReadPooling(const h5::File& f, ProbeResults& r) {
  const std::string& path = r.path;
  const std::string where = "'" + path + "'";
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds;
  if (f.Exists("alpha"))
    for (const auto& t : f.OpenGroup("alpha").Members())
      for (const auto& p : f.OpenGroup("alpha/" + t).Members())
        for (const auto& s : f.OpenGroup("alpha/" + t + "/" + p).Members()) {
          const std::string name = "alpha/" + t + "/" + p + "/" + s;
          CheckName(t, path, "target");
          CheckName(p, path, "probe");
          CheckName(s, path, "source");
          const h5::Dataset ds = f.OpenDataset(name);
          const auto dims = ds.dims();  // [L, K, S, T]
          if (dims.size() != 4 || dims[0] != L || dims[1] != K || dims[2] != S || dims[3] < 1 ||
              dims[3] > hsize_t(2 * r.n))
            throw core::InputError(where, "",
                                   "/" + name + " should have shape [" + std::to_string(L) + ", " +
                                       std::to_string(K) + ", " + std::to_string(S) +
                                       ", T] with T in 1.." + std::to_string(2 * r.n));
          const std::vector<double> raw = ds.ReadAll<double>();
          const hsize_t T = dims[3];
          arma::mat a(T, L * K, arma::fill::zeros);
          for (hsize_t cell = 0; cell < L * K; ++cell)
            for (hsize_t s2 = 0; s2 < S; ++s2)
              for (hsize_t t2 = 0; t2 < T; ++t2)
                a(t2, cell) += raw[(cell * S + s2) * T + t2] / double(S);
          r.alpha[t + "/" + p + "/" + s] = std::move(a);
        }
}

}  // namespace

// /ceilings/<target>: [k, seed], each a finite R2 of at most 1, of a probed target.
void ReadCeilings(const h5::File& f, ProbeResults& r) {
  if (!f.Exists("ceilings")) return;
  const std::string where = "'" + r.path + "'";
  for (const auto& t : f.OpenGroup("ceilings").Members()) {
    if (std::find(r.targets.begin(), r.targets.end(), t) == r.targets.end())
      throw core::InputError(where, "",
                             "/ceilings/" + t.substr(0, 80) + " is not a target of /metrics");
    const h5::Dataset ds = f.OpenDataset("ceilings/" + t);
    ds.ExpectDims({r.ks.size(), hsize_t(r.seeds)});
    arma::mat c(r.seeds, r.ks.size());  // row-major [k, seed] -> S x K
    ds.Read(c.memptr(), c.n_elem);
    if (!c.is_finite() || c.max() > 1)
      throw core::InputError(where, "", "/ceilings/" + t + " should hold finite R2 values <= 1");
    r.ceilings[t] = c.t();
  }
}

// /codelength/<target>/<probe>/<source>/{bits,uniform_bits} [layer, k, seed] of probed, positive
// and finite, into `metric` as code_bits and uniform_bits; the schedule; and the per-block
// datasets' shapes.
void ReadCodelength(const h5::File& f, ProbeResults& r) {
  if (!f.Exists("codelength")) return;
  const std::string where = "'" + r.path + "'";
  const h5::Group g = f.OpenGroup("codelength");
  nlohmann::json fr;
  try {
    fr = nlohmann::json::parse(g.GetString("fractions"));
  } catch (const nlohmann::json::exception&) {
    fr = nullptr;
  }
  if (!fr.is_array() || fr.size() < 2 || fr.size() > 1000)
    throw core::InputError(where, "",
                           "/codelength attribute 'fractions' should be a JSON list of "
                           "2..1000 fractions");
  double prev = 0;
  for (const auto& x : fr) {
    if (!x.is_number() || !(x.get<double>() > prev) || x.get<double>() > 1)
      throw core::InputError(where, "",
                             "/codelength attribute 'fractions' should increase "
                             "strictly within (0, 1]");
    prev = x.get<double>();
    r.code_fractions.push_back(prev);
  }
  r.code_precision = g.GetDouble("precision");
  if (!(r.code_precision > 0 && r.code_precision <= 1))
    throw core::InputError(where, "", "/codelength attribute 'precision' should be in (0, 1]");
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds, B = r.code_fractions.size();
  f.OpenDataset("codelength/block_ends").ExpectDims({S, B});
  for (const auto& t : g.Members()) {
    if (t == "block_ends") continue;
    if (std::find(r.targets.begin(), r.targets.end(), t) == r.targets.end())
      throw core::InputError(where, "",
                             "/codelength/" + t.substr(0, 80) + " is not a target of /metrics");
    for (const auto& p : f.OpenGroup("codelength/" + t).Members()) {
      if (p != "ridge" && p != "linear" && p != "mlp")
        throw core::InputError(where, "",
                               "/codelength/" + t + "/" + p.substr(0, 80) +
                                   ": expected a probe family (ridge, linear, mlp)");
      for (const auto& s : f.OpenGroup("codelength/" + t + "/" + p).Members()) {
        if (!r.Find(t, p, s, "r2"))
          throw core::InputError(where, "",
                                 "/codelength/" + t + "/" + p + "/" + s.substr(0, 80) +
                                     " has no /metrics counterpart");
        const std::string base = "codelength/" + t + "/" + p + "/" + s + "/";
        for (const char* m : {"bits", "uniform_bits"}) {
          const h5::Dataset ds = f.OpenDataset(base + m);
          ds.ExpectDims({L, K, S});
          arma::cube c(S, K, L);  // column-major (seed, k, layer) == row-major [L, K, S]
          ds.Read(c.memptr(), c.n_elem);
          if (!c.is_finite())
            throw core::InputError(where, "", "/" + base + m + " holds NaN or infinite bits");
          r.metric[t + "/" + p + "/" + s + "/" + (m == std::string("bits") ? "code_bits" : m)] =
              std::move(c);
        }
        for (const char* m : {"block_bits", "uniform_block_bits", "block_lambda"})
          f.OpenDataset(base + m).ExpectDims({L, K, S, B});
      }
    }
  }
}

// /target_maps/r2 [k, from, to] over the file's targets (an attribute lists them, in order).
void ReadTargetMaps(const h5::File& f, ProbeResults& r) {
  if (!f.Exists("target_maps/r2")) return;
  const std::string where = "'" + r.path + "'";
  const h5::Dataset d = f.OpenDataset("target_maps/r2");
  const std::vector<std::string> names = d.GetStringList("targets");
  for (const auto& t : names)
    if (std::find(r.targets.begin(), r.targets.end(), t) == r.targets.end() &&
        std::find(r.targets.begin(), r.targets.end(), probes::QueryTargetName(t)) ==
            r.targets.end())
      throw core::InputError(
          where, "",
          "/target_maps/r2 names '" + t.substr(0, 80) + "', which is not a probed target");
  const hsize_t T = names.size(), K = r.ks.size();
  if (T < 2 || T > 1000)
    throw core::InputError(where, "", "/target_maps/r2 should list 2..1000 targets");
  d.ExpectDims({K, T, T});
  std::vector<double> v(K * T * T);
  d.Read(v.data(), v.size());
  r.target_map_r2.set_size(T, T, K);
  for (hsize_t k = 0; k < K; ++k)
    for (hsize_t i = 0; i < T; ++i)
      for (hsize_t j = 0; j < T; ++j) {
        const double x = v[(k * T + i) * T + j];
        if (!(x <= 1) && !std::isnan(x))
          throw core::InputError(where, "", "/target_maps/r2 holds a value above 1");
        r.target_map_r2(i, j, k) = x;
      }
  r.target_map_names = names;
}

ProbeResults ReadProbesFile(const std::string& path) {
  return ReadProbes(h5::File::Open(path), path);
}

ProbeResults ReadProbes(h5::File f, const std::string& path) {
  data::CheckFormat(f, kProbesFormat);
  ProbeResults r;
  r.path = path;
  ReadLayout(f, r);
  ReadMetrics(f, r);
  ReadProvenance(f, r);
  if (f.Exists("errors")) ReadErrors(f, r);
  // Canonical probe order.
  std::vector<std::string> order;
  for (const char* p : {"ridge", "linear", "mlp"})
    if (std::find(r.probes.begin(), r.probes.end(), p) != r.probes.end()) order.push_back(p);
  r.probes = order;
  ReadPooling(f, r);
  ReadCeilings(f, r);
  ReadCodelength(f, r);
  ReadTargetMaps(f, r);
  r.file = std::make_shared<const h5::File>(std::move(f));
  return r;
}

RidgeReadout ReadRidgeReadout(const ProbeResults& r, const std::string& target, int layer, int k,
                              int seed, const std::string& source) {
  const std::string where = "'" + r.path + "'";
  const auto li = std::find(r.layers.begin(), r.layers.end(), layer);
  const auto ki = std::find(r.ks.begin(), r.ks.end(), k);
  if (li == r.layers.end())
    throw core::InputError(where, "", "has no probes of layer " + std::to_string(layer));
  if (ki == r.ks.end())
    throw core::InputError(where, "", "has no probes at k = " + std::to_string(k));
  if (seed < 0 || seed >= r.seeds)
    throw core::InputError(where, "", "has no probe seed " + std::to_string(seed));
  const std::string group = "ridge/" + target + "/" + source;
  if (!r.file) throw std::logic_error("ReadRidgeReadout: the results were not read from a file");
  const h5::File& f = *r.file;
  if (!f.Exists(group + "/weights"))
    throw core::InputError(where, "",
                           "has no ridge probe of '" + target.substr(0, 80) + "' (no /" + group +
                               "/weights); probe it with the ridge family");
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds;
  const hsize_t l = li - r.layers.begin(), cell = (ki - r.ks.begin()) * S + seed;
  const h5::Dataset dw = f.OpenDataset(group + "/weights");
  const auto dims = dw.dims();
  // p and m are bounded by what a model of this file's width could have: a hostile file must
  // not make us allocate gigabytes.
  const auto model = r.model_config.empty()
                         ? std::optional<learners::ModelConfig>()
                         : learners::ModelConfig::FromJson(r.model_config, where + " model_config");
  const hsize_t max_p = model ? hsize_t(model->hidden) : hsize_t(1) << 16;
  const hsize_t max_m = hsize_t(r.d) * r.d;
  if (dims.size() != 5 || dims[0] != L || dims[1] != K || dims[2] != S || dims[3] < 1 ||
      dims[3] > max_p || (model && dims[3] != max_p) || dims[4] < 1 || dims[4] > max_m)
    throw core::InputError(where, "",
                           "/" + group + "/weights should have shape [" + std::to_string(L) + ", " +
                               std::to_string(K) + ", " + std::to_string(S) +
                               ", hidden, m] with m <= d^2");
  const hsize_t p = dims[3], m = dims[4];
  RidgeReadout out;
  std::vector<double> w(K * S * p * m);
  dw.ReadRows(l, 1, w.data(), w.size());
  const arma::mat wt(w.data() + cell * p * m, m, p);  // row-major [p, m] == column-major m x p
  out.weights = wt.t();
  const h5::Dataset db = f.OpenDataset(group + "/intercept");
  db.ExpectDims({L, K, S, m});
  std::vector<double> b(K * S * m);
  db.ReadRows(l, 1, b.data(), b.size());
  out.intercept = arma::vec(b.data() + cell * m, m);
  const h5::Dataset dl = f.OpenDataset(group + "/lambda");
  dl.ExpectDims({L, K, S});
  std::vector<double> lam(K * S);
  dl.ReadRows(l, 1, lam.data(), lam.size());
  out.lambda = lam[cell];
  if (f.Exists(group + "/feature_scale")) {
    const h5::Dataset ds = f.OpenDataset(group + "/feature_scale");
    ds.ExpectDims({L, K, S, p});
    std::vector<double> sc(K * S * p);
    ds.ReadRows(l, 1, sc.data(), sc.size());
    out.feature_scale = arma::vec(sc.data() + cell * p, p);
    if (!out.feature_scale.is_finite() || out.feature_scale.min() <= 0)
      throw core::InputError(
          where, "", "/" + group + "/feature_scale holds a non-positive or non-finite scale");
  }
  if (!out.weights.is_finite() || !out.intercept.is_finite() || !std::isfinite(out.lambda))
    throw core::InputError(where, "",
                           "the ridge probe of '" + target + "' at layer " + std::to_string(layer) +
                               ", k = " + std::to_string(k) + " holds NaN or infinite weights");
  return out;
}

}  // namespace icl::probes
