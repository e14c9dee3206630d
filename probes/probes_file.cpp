// probes.h5: writer, CSV, and the checked reader.
#include "probes/probes_file.hpp"

#include "core/errors.hpp"

#include <sys/stat.h>

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
#include "core/sha256.hpp"
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
        for (const char* m : {"mse", "nmse", "r2", "r2_lo", "r2_hi", "nmse_lo", "nmse_hi"}) {
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

void WriteProbesCsv(std::ostream& os, const ProbeOutput& out) {
  // Runs with codelength add its two columns (empty for probes without a code).
  const bool coded = !out.codes.empty();
  os << "target,probe,source,layer,k,seed,mse,nmse,r2,r2_lo,r2_hi,nmse_lo,nmse_hi"
     << (coded ? ",code_bits,uniform_bits\n" : "\n");
  for (const auto& r : out.records) {
    os << fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}",
                      r.target, r.probe, r.source, r.layer, r.k, r.seed, r.mse, r.nmse, r.r2,
                      r.r2_lo, r.r2_hi, r.nmse_lo, r.nmse_hi);
    if (coded)
      os << (std::isfinite(r.code_bits)
                 ? fmt::format(",{:.10g},{:.10g}", r.code_bits, r.uniform_bits)
                 : std::string(","));
    os << "\n";
  }
}

InputRecord RecordInput(const std::string& path, bool verify_rows) {
  InputRecord r;
  const auto info = extract::ReadActivationsInfo(path);
  if (!info.content_sha256.empty()) {
    if (verify_rows)
      extract::VerifyRows(path, "verify-inputs");
    else
      extract::VerifyContentDigest(path, "activations");
    r.digest = info.content_sha256;
    r.kind = "content_sha256";
  } else {
    r.digest = core::Sha256File(path);
    r.kind = "file_sha256";
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    r.size = st.st_size;
    r.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return r;
}

namespace {

// Where a (layer, k) lies in the file's [layer, k, ...] datasets.
struct CellIndex {
  const ProbeOutput& out;
  std::ptrdiff_t Layer(int layer) const {
    return std::find(out.layers.begin(), out.layers.end(), layer) - out.layers.begin();
  }
  std::ptrdiff_t K(int k) const {
    return std::find(out.ks.begin(), out.ks.end(), k) - out.ks.begin();
  }
};

// `info`: the main source's description; `record`: what names each input.
void WriteRootAttributes(h5::File& f, const ProbeRequest& req, const ProbeOutput& out,
                         const extract::ActivationsInfo& info,
                         const std::function<InputRecord(const std::string&)>& record) {
  data::WriteFormatAttrs(f, kProbesFormat);
  f.SetAttr("activations", req.activations);
  const InputRecord a = record(req.activations);
  f.SetAttr("activations_digest", a.digest);
  f.SetAttr("activations_digest_kind", a.kind);
  f.SetAttr("activations_size", a.size);
  f.SetAttr("activations_mtime_ns", a.mtime_ns);
  f.SetAttr("checkpoint_sha256", info.checkpoint_sha256);
  if (info.ridge_lambda >= 0) f.SetAttr("ridge_lambda", info.ridge_lambda);
  if (!info.learner_targets.empty()) {
    nlohmann::json learners = nlohmann::json::object();
    for (const auto& spec : info.learner_targets)
      learners[extract::schema::LearnerTargetName(spec)] = spec;
    f.SetAttr("learner_targets", learners.dump());
  }
  f.SetAttr("model_config", info.model.ToJson());
  f.SetAttr("task_config", info.task.ToJson());
  f.SetAttr("probe_config", req.ToJson());
  f.SetAttr("sources", out.sources);
  nlohmann::json controls = nlohmann::json::object();
  for (const auto& c : req.controls) {
    const InputRecord r = record(c);
    controls[SourceName(c)] = {{"path", c},
                               {"digest", r.digest},
                               {"digest_kind", r.kind},
                               {"size", r.size},
                               {"mtime_ns", r.mtime_ns}};
  }
  f.SetAttr("controls", controls.dump());
  f.SetAttr("layers", std::vector<std::int64_t>(out.layers.begin(), out.layers.end()));
  f.SetAttr("ks", std::vector<std::int64_t>(out.ks.begin(), out.ks.end()));
  f.SetAttr("seeds", out.seeds);
  f.SetAttr(
      "metric_layout",
      std::string("/metrics/<target>/<probe>/<source>/{mse,nmse,r2} [layer index, k index, seed] "
                  "with layers and ks as in the root attributes"));
  f.SetAttr("bootstrap_replicates", req.bootstrap);
  f.SetAttr("bootstrap_seed", static_cast<std::int64_t>(req.seed));
  f.SetAttr("confidence", kConfidence);
}

// /errors: the per-prompt test errors the intervals resample, and /metrics and /selectivity.
void WriteScores(h5::File& f, const ProbeOutput& out) {
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::array<arma::cube, 7>> metrics;  // key target/probe/source
  const hsize_t n_test = out.records.empty() ? 0 : out.records[0].sse.n_elem;
  std::map<std::string, std::vector<double>> sse;  // key target/probe/source: [L, K, S, n]
  std::map<std::string, std::vector<double>> sst;  // key target: [K, S, n]
  for (const auto& r : out.records) {
    const std::string key = r.target + "/" + r.probe + "/" + r.source;
    auto& m = metrics[key];
    if (m[0].is_empty())
      for (auto& c : m)
        c.set_size(S, K, L), c.fill(arma::datum::nan);  // column-major S x K x L == [L, K, S]
    const double values[] = {r.mse, r.nmse, r.r2, r.r2_lo, r.r2_hi, r.nmse_lo, r.nmse_hi};
    for (int i = 0; i < 7; ++i)
      m[i](r.seed, at.K(r.k), at.Layer(r.layer)) = values[i];
    if (r.sse.n_elem != n_test || r.sst.n_elem != n_test)
      throw std::logic_error("probes file: records with different numbers of test prompts");
    auto& e = sse[key];
    if (e.empty()) e.assign(L * K * S * n_test, NAN);
    std::copy(r.sse.begin(), r.sse.end(),
              e.begin() + ((at.Layer(r.layer) * K + at.K(r.k)) * S + r.seed) * n_test);
    auto& t = sst[r.target];
    if (t.empty()) t.assign(K * S * n_test, NAN);
    std::copy(r.sst.begin(), r.sst.end(), t.begin() + (at.K(r.k) * S + r.seed) * n_test);
  }
  for (const auto& [key, e] : sse) {
    h5::Dataset d = f.CreateDataset<double>("errors/" + key + "/sse", {L, K, S, n_test},
                                            {"layer", "k", "seed", "test_prompt"});
    d.Write(e.data(), e.size());
    d.SetAttr("description",
              std::string("[layer, k, seed, test prompt]: squared error of the probe's prediction "
                          "summed over the target's entries; test prompts in prompt order "
                          "(/splits/seed_<s> == 2)"));
  }
  for (const auto& [target, t] : sst) {
    h5::Dataset d = f.CreateDataset<double>("errors/" + target + "/sst", {K, S, n_test},
                                            {"k", "seed", "test_prompt"});
    d.Write(t.data(), t.size());
    d.SetAttr("description", std::string("[k, seed, test prompt]: squared distance of the target "
                                         "from its test-split mean (sum sse / sum sst = nmse)"));
  }
  const std::vector<std::string> cell = {"layer", "k", "seed"};
  for (const auto& [key, m] : metrics) {
    const char* names[] = {"mse", "nmse", "r2", "r2_lo", "r2_hi", "nmse_lo", "nmse_hi"};
    for (int i = 0; i < 7; ++i)
      f.CreateDataset<double>("metrics/" + key + "/" + names[i], {L, K, S}, cell)
          .Write(m[i].memptr(), m[i].n_elem);
    // Selectivity of the model over each control: R2(model) - R2(control).
    const auto slash = key.rfind('/');
    const std::string base = key.substr(0, slash), source = key.substr(slash + 1);
    if (source != "model" && metrics.count(base + "/model")) {
      const arma::cube sel = metrics.at(base + "/model")[2] - m[2];
      f.CreateDataset<double>("selectivity/" + base + "/" + source, {L, K, S}, cell)
          .Write(sel.memptr(), sel.n_elem);
    }
  }
}

// /ridge: weights, intercepts, the chosen lambda and the leave-one-out curve of every fit.
void WriteRidge(h5::File& f, const ProbeRequest& req, const ProbeOutput& out) {
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Ridge*>> ridge;
  for (const auto& r : out.ridge)
    ridge[r.target + "/" + r.source].push_back(&r);
  for (const auto& [key, list] : ridge) {
    const hsize_t p = list[0]->weights.n_rows, m = list[0]->weights.n_cols,
                  nl = list[0]->loo_mse.n_elem;
    std::vector<double> w(L * K * S * p * m, NAN), b(L * K * S * m, NAN), lam(L * K * S, NAN),
        loo(L * K * S * nl, NAN), scale(L * K * S * p, NAN);
    for (const auto* r : list) {
      const std::size_t cell = (at.Layer(r->layer) * K + at.K(r->k)) * S + r->seed;
      const arma::mat wt = r->weights.t();  // m x p column-major == [p, m] row-major
      std::copy(wt.begin(), wt.end(), w.begin() + cell * p * m);
      std::copy(r->intercept.begin(), r->intercept.end(), b.begin() + cell * m);
      lam[cell] = r->lambda;
      std::copy(r->loo_mse.begin(), r->loo_mse.end(), loo.begin() + cell * nl);
      if (r->feature_scale.n_elem == p)
        std::copy(r->feature_scale.begin(), r->feature_scale.end(), scale.begin() + cell * p);
    }
    h5::Dataset dw = f.CreateDataset<double>("ridge/" + key + "/weights", {L, K, S, p, m},
                                             {"layer", "k", "seed", "feature", "output"});
    dw.Write(w.data(), w.size());
    dw.SetAttr(
        "description",
        std::string("[layer, k, seed, feature, output] on raw (unstandardised) hidden states"));
    f.CreateDataset<double>("ridge/" + key + "/intercept", {L, K, S, m},
                            {"layer", "k", "seed", "output"})
        .Write(b.data(), b.size());
    f.CreateDataset<double>("ridge/" + key + "/lambda", {L, K, S}, {"layer", "k", "seed"})
        .Write(lam.data(), lam.size());
    f.CreateDataset<double>("ridge/" + key + "/loo_mse", {L, K, S, nl},
                            {"layer", "k", "seed", "lambda"})
        .Write(loo.data(), loo.size());
    h5::Dataset ds = f.CreateDataset<double>("ridge/" + key + "/feature_scale", {L, K, S, p},
                                             {"layer", "k", "seed", "feature"});
    ds.Write(scale.data(), scale.size());
    ds.SetAttr("description",
               std::string("[layer, k, seed, feature] training standard deviation of each hidden "
                           "unit (1 where constant): the probe standardised by it"));
  }
  if (!ridge.empty())
    f.OpenGroup("ridge").SetAttr(
        "lambdas",
        nlohmann::json(std::vector<double>(req.lambdas.begin(), req.lambdas.end())).dump());
}

// /splits: the prompt splits of the main file, so that others can reproduce the fits; /alpha:
// the pooling weights of gradient probes.
void WriteSplitsAndPooling(h5::File& f, const ProbeOutput& out) {
  for (std::size_t s = 0; s < out.roles.size(); ++s) {
    h5::Dataset d = f.CreateDataset<std::uint8_t>("splits/seed_" + std::to_string(s),
                                                  {hsize_t(out.roles[s].size())}, {"prompt"});
    d.Write(out.roles[s].data(), out.roles[s].size());
    d.SetAttr(
        "description",
        std::string(
            "role of each prompt of the main activations file: 0 train, 1 validation, 2 test"));
  }
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Alpha*>> alphas;
  for (const auto& a : out.alphas)
    alphas[a.target + "/" + a.probe + "/" + a.source].push_back(&a);
  for (const auto& [key, list] : alphas) {
    const hsize_t T = list[0]->alpha.n_elem;
    std::vector<double> a(L * K * S * T, NAN);
    for (const auto* x : list) {
      const std::size_t cell = (at.Layer(x->layer) * K + at.K(x->k)) * S + x->seed;
      std::copy(x->alpha.begin(), x->alpha.end(), a.begin() + cell * T);
    }
    h5::Dataset da =
        f.CreateDataset<double>("alpha/" + key, {L, K, S, T}, {"layer", "k", "seed", "position"});
    da.Write(a.data(), a.size());
    da.SetAttr(
        "description",
        std::string("[layer, k, seed, position]: softmax pooling weights; positions after the "
                    "state after k examples are 0"));
  }
}

// /codelength: each ridge probe's online codelength, its reference code and each block's bits,
// with the blocks' ends in training rows per seed.
void WriteCodelength(h5::File& f, const ProbeRequest& req, const ProbeOutput& out) {
  if (out.codes.empty()) return;
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds,
                B = req.codelength_fractions.size();
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Code*>> codes;
  for (const auto& c : out.codes)
    codes[c.target + "/" + c.probe + "/" + c.source].push_back(&c);
  const std::vector<std::string> cell = {"layer", "k", "seed"},
                                 cell_block = {"layer", "k", "seed", "block"};
  for (const auto& [key, list] : codes) {
    std::vector<double> bits(L * K * S, NAN), uniform(L * K * S, NAN), block(L * K * S * B, NAN),
        ublock(L * K * S * B, NAN), lam(L * K * S * B, NAN);
    for (const auto* c : list) {
      const std::size_t i = (at.Layer(c->layer) * K + at.K(c->k)) * S + c->seed;
      if (c->code.block_bits.n_elem != B) throw std::logic_error("probes file: blocks differ");
      bits[i] = c->code.bits;
      uniform[i] = c->code.uniform_bits;
      std::copy(c->code.block_bits.begin(), c->code.block_bits.end(), block.begin() + i * B);
      std::copy(c->code.uniform_block_bits.begin(), c->code.uniform_block_bits.end(),
                ublock.begin() + i * B);
      std::copy(c->code.block_lambda.begin(), c->code.block_lambda.end(), lam.begin() + i * B);
    }
    const std::string g = "codelength/" + key + "/";
    h5::Dataset db = f.CreateDataset<double>(g + "bits", {L, K, S}, cell);
    db.Write(bits.data(), bits.size());
    db.SetAttr("description", std::string("online codelength of the training targets given the "
                                          "state, in bits (block 0 by the reference code)"));
    h5::Dataset du = f.CreateDataset<double>(g + "uniform_bits", {L, K, S}, cell);
    du.Write(uniform.data(), uniform.size());
    du.SetAttr("description", std::string("the same rows by the reference code: every entry by "
                                          "the Gaussian of block 0's mean and variance"));
    f.CreateDataset<double>(g + "block_bits", {L, K, S, B}, cell_block)
        .Write(block.data(), block.size());
    f.CreateDataset<double>(g + "uniform_block_bits", {L, K, S, B}, cell_block)
        .Write(ublock.data(), ublock.size());
    h5::Dataset dl = f.CreateDataset<double>(g + "block_lambda", {L, K, S, B}, cell_block);
    dl.Write(lam.data(), lam.size());
    dl.SetAttr("description", std::string("the penalty each block was coded with, chosen by the "
                                          "evidence of the blocks before it (block 0: NaN)"));
  }
  std::vector<std::int64_t> ends;
  for (const auto& e : out.code_block_ends)
    ends.insert(ends.end(), e.begin(), e.end());
  h5::Dataset de =
      f.CreateDataset<std::int64_t>("codelength/block_ends", {S, B}, {"seed", "block"});
  de.Write(ends.data(), ends.size());
  de.SetAttr("description", std::string("training rows (in prompt order) that end each block"));
  h5::Group g = f.OpenGroup("codelength");
  g.SetAttr("fractions", nlohmann::json(req.codelength_fractions).dump());
  g.SetAttr("precision", req.codelength_precision);
  g.SetAttr("description",
            std::string("online (prequential) code of the ridge probe's training targets, "
                        "Voita & Titov (2020): block 0 by N(mean, variance) of block 0 per "
                        "entry, block i by the Bayesian ridge predictive fitted on blocks "
                        "0..i-1 (penalty by their evidence); every entry to precision times "
                        "block 0's standard deviation"));
}

}  // namespace

namespace {

// Everything of a probes file but its creation, into `f`.
void WriteProbes(h5::File& f, const ProbeRequest& req, const ProbeOutput& out,
                 const extract::ActivationsInfo& info,
                 const std::function<InputRecord(const std::string&)>& record) {
  WriteRootAttributes(f, req, out, info, record);
  WriteScores(f, out);
  WriteRidge(f, req, out);
  WriteSplitsAndPooling(f, out);
  WriteCodelength(f, req, out);
  if (!out.target_map_r2.is_empty()) {
    // Column-major (from, to, k) == row-major [k, to, from]; stored as [k, from, to].
    const hsize_t T = out.target_map_r2.n_rows, K = out.target_map_r2.n_slices;
    std::vector<double> v(K * T * T);
    for (hsize_t k = 0; k < K; ++k)
      for (hsize_t i = 0; i < T; ++i)
        for (hsize_t j = 0; j < T; ++j)
          v[(k * T + i) * T + j] = out.target_map_r2(i, j, k);
    h5::Dataset d = f.CreateDataset<double>("target_maps/r2", {K, T, T}, {"k", "from", "to"});
    d.Write(v.data(), v.size());
    d.SetAttr("targets", req.targets);
    d.SetAttr("description",
              std::string("[k, from, to]: test R2 of the least-squares affine map from one target "
                          "to another (seed 0's split): near 1 both ways, no probe can tell the "
                          "two apart"));
  }
  for (const auto& [target, c] : out.ceilings) {
    const arma::mat t = c.t();  // K x S -> row-major [k, seed]
    h5::Dataset ds =
        f.CreateDataset<double>("ceilings/" + target, {c.n_rows, c.n_cols}, {"k", "seed"});
    ds.Write(t.memptr(), t.n_elem);
    ds.SetAttr("description",
               std::string("R2 of E[w | prompt] = w_ridge(sigma^2/tau^2) on the seed's test "
                           "prompts: the most any representation can give for this target"));
  }
}

}  // namespace

void WriteProbesFile(const std::string& path, const ProbeRequest& req, const ProbeOutput& out,
                     const std::map<std::string, InputRecord>& inputs) {
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  WriteProbes(f, req, out, extract::ReadActivationsInfo(req.activations),
              [&](const std::string& p) {
                const auto it = inputs.find(p);
                return it != inputs.end() ? it->second : RecordInput(p, false);
              });
  f.Close();
}

void WriteProbesFile(const std::string& path, const ProbeRequest& req, const ProbeOutput& out,
                     const extract::ActivationsInfo& info) {
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  WriteProbes(f, req, out, info, [](const std::string&) { return InputRecord{"", "memory"}; });
  f.Close();
}

ProbeResults ProbeResultsInMemory(const ProbeRequest& req, const ProbeOutput& out,
                                  const extract::ActivationsInfo& info) {
  h5::File f = h5::File::CreateInMemory(info.path);
  WriteProbes(f, req, out, info, [](const std::string&) { return InputRecord{"", "memory"}; });
  return ReadProbes(std::move(f), info.path);
}

}  // namespace icl::probes
