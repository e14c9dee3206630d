// trace.h5 and its CSVs (trace_file.hpp holds the schema).
#include "analysis/trace_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"

namespace icl::analysis {

namespace {

const char* const kTables[] = {"spd", "spd_lo", "spd_hi", "cos", "cos_lo", "cos_hi"};
const char* const kPerLayer[] = {"best",        "best_lo", "best_hi",   "best_spd", "best_spd_lo",
                                 "best_spd_hi", "margin",  "margin_lo", "margin_hi"};
const char* const kExcess[] = {"excess", "excess_lo", "excess_hi"};
const char* const kRates[] = {"rate",      "rate_lo",      "rate_hi",
                              "log2_rate", "log2_rate_lo", "log2_rate_hi"};

arma::mat* Table(IterateMatch& m, int i) {
  arma::mat* t[] = {&m.spd, &m.spd_lo, &m.spd_hi, &m.cos, &m.cos_lo, &m.cos_hi};
  return t[i];
}
const arma::mat& Table(const IterateMatch& m, int i) {
  return *Table(const_cast<IterateMatch&>(m), i);
}
arma::vec* PerLayer(IterateMatch& m, int i) {
  arma::vec* v[] = {&m.best,        &m.best_lo, &m.best_hi,   &m.best_spd, &m.best_spd_lo,
                    &m.best_spd_hi, &m.margin,  &m.margin_lo, &m.margin_hi};
  return v[i];
}
arma::vec* Excess(IterateMatch& m, int i) {
  arma::vec* v[] = {&m.excess, &m.excess_lo, &m.excess_hi};
  return v[i];
}
double* Rates(IterateMatch& m, int i) {
  double* v[] = {&m.rate, &m.rate_lo, &m.rate_hi, &m.log2_rate, &m.log2_rate_lo, &m.log2_rate_hi};
  return v[i];
}

void WriteMatch(h5::Group g, const IterateMatch& m, bool excess) {
  const hsize_t L1 = m.spd.n_rows, T1 = m.spd.n_cols;
  for (int i = 0; i < 6; ++i) {
    const arma::mat rows = Table(m, i).t();  // column-major T1 x L1 == row-major [L1, T1]
    g.CreateDataset<double>(kTables[i], {L1, T1}, {"layer", "iterate"})
        .Write(rows.memptr(), rows.n_elem);
  }
  IterateMatch& mm = const_cast<IterateMatch&>(m);
  for (int i = 0; i < 9; ++i)
    g.CreateDataset<double>(kPerLayer[i], {L1}, {"layer"}).Write(PerLayer(mm, i)->memptr(), L1);
  if (excess)
    for (int i = 0; i < 3; ++i)
      g.CreateDataset<double>(kExcess[i], {L1}, {"layer"}).Write(Excess(mm, i)->memptr(), L1);
  for (int i = 0; i < 6; ++i)
    g.SetAttr(kRates[i], *Rates(mm, i));
  g.SetAttr("rate_layers", m.rate_layers);
}

void WriteInputs(h5::File& f, const std::string& prefix, const std::vector<TraceInput>& in) {
  std::vector<std::string> paths, shas, acts;
  std::vector<std::int64_t> seeds;
  for (const auto& i : in) {
    paths.push_back(i.checkpoint);
    shas.push_back(i.sha256);
    acts.push_back(i.activations);
    seeds.push_back(static_cast<std::int64_t>(i.train_seed));
  }
  f.SetAttr(prefix + "checkpoints", paths);
  f.SetAttr(prefix + "checkpoint_sha256", shas);
  f.SetAttr(prefix + "activations", acts);
  f.SetAttr(prefix + "seeds", seeds);
}

void WritePredictions(h5::File& f, const std::string& name, const std::string& axis,
                      const std::vector<arma::cube>& cubes) {
  if (cubes.empty()) return;
  const arma::cube& c = cubes[0];
  std::vector<double> v;
  v.reserve(cubes.size() * c.n_elem);
  for (const auto& x : cubes)  // cube (K, N, L') column-major == row-major [L', N, K]
    v.insert(v.end(), x.begin(), x.end());
  f.CreateDataset<double>(name, {cubes.size(), c.n_slices, c.n_cols, c.n_rows},
                          {axis, "layer", "prompt", "k"})
      .Write(v.data(), v.size());
}

}  // namespace

void WriteTraceFile(const std::string& path, const TraceResult& r) {
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  data::WriteFormatAttrs(f, kTraceFormat);
  const TraceRequest& q = r.request;
  f.SetAttr("readout", std::string(ReadoutName(q.readout)));
  f.SetAttr("task_config", r.task.ToJson());
  f.SetAttr("seed", static_cast<std::int64_t>(r.prompt_seed));
  f.SetAttr("prompts_from", r.prompts_from);
  f.SetAttr("prompts", static_cast<std::int64_t>(q.prompts));
  f.SetAttr("fit_prompts",
            static_cast<std::int64_t>(q.readout == Readout::kRidge ? q.fit_prompts : 0));
  f.SetAttr("bootstrap_replicates", q.bootstrap);
  f.SetAttr("level", q.level);
  f.SetAttr("ks", std::vector<std::int64_t>(q.ks.begin(), q.ks.end()));
  f.SetAttr("layers", std::vector<std::int64_t>(q.layers.begin(), q.layers.end()));
  f.SetAttr("model_layers", r.model_layers);
  f.SetAttr("algorithms", q.algorithms);
  WriteInputs(f, "", r.learners);
  WriteInputs(f, "control_", r.controls);
  f.SetAttr("similarity_rule",
            std::string("spd: 1 - sum (a - b)^2 / sum (a^2 + b^2 + 1e-6 y^2) over prompts and k, "
                        "the mean over seeds; cos: the mean over prompts of the cosine over k of "
                        "the residuals a - y and b - y; intervals: two-stage percentile "
                        "bootstrap (seeds, then prompts)"));
  const arma::mat labels = r.labels;  // K x N column-major == row-major [N, K]
  f.CreateDataset<double>("labels", {labels.n_cols, labels.n_rows}, {"prompt", "k"})
      .Write(labels.memptr(), labels.n_elem);
  f.CreateDataset<double>("readout_lambdas", {q.lambdas.n_elem}, {"lambda"})
      .Write(q.lambdas.memptr(), q.lambdas.n_elem);
  WritePredictions(f, "predictions", "seed", r.predictions);
  WritePredictions(f, "control_predictions", "control", r.control_predictions);
  for (const auto& a : r.algorithms) {
    h5::Group g = f.CreateGroup("trace/" + a.algorithm.spec);
    g.SetAttr("spec", a.algorithm.spec);
    g.SetAttr("family", a.algorithm.family);
    g.SetAttr("steps", a.algorithm.steps);
    WriteMatch(g.CreateGroup("learner"), a.model, r.HasControls());
    if (r.HasControls()) WriteMatch(g.CreateGroup("control"), a.control, false);
  }
  f.Close();
}

namespace {

core::InputError Bad(const std::string& path, const std::string& what) {
  return core::InputError("'" + path + "'", "", what);
}

std::vector<int> IntList(const h5::File& f, const std::string& attr, int lo, int hi) {
  std::vector<int> out;
  for (const std::int64_t v : f.GetIntList(attr)) {
    if (v < lo || v > hi)
      throw Bad(f.file(), fmt::format("attribute '{}' holds {}, outside {}..{}", attr, v, lo, hi));
    out.push_back(int(v));
  }
  if (out.empty()) throw Bad(f.file(), "attribute '" + attr + "' is empty");
  if (std::set<int>(out.begin(), out.end()).size() != out.size())
    throw Bad(f.file(), "attribute '" + attr + "' lists an entry twice");
  return out;
}

std::vector<double> ReadVector(const h5::Group& g, const std::string& name, hsize_t count) {
  const h5::Dataset ds = g.OpenDataset(name);
  ds.ExpectDims({count});
  std::vector<double> v(count);
  ds.Read(v.data(), v.size());
  return v;
}

std::vector<TraceInput> ReadInputs(const h5::File& f, const std::string& prefix) {
  const auto paths = f.GetStringList(prefix + "checkpoints");
  const auto shas = f.GetStringList(prefix + "checkpoint_sha256");
  const auto acts = f.GetStringList(prefix + "activations");
  const auto seeds = f.GetIntList(prefix + "seeds");
  if (shas.size() != paths.size() || acts.size() != paths.size() || seeds.size() != paths.size())
    throw Bad(f.file(), "attributes '" + prefix + "checkpoints', '" + prefix +
                            "checkpoint_sha256', '" + prefix + "activations' and '" + prefix +
                            "seeds' differ in length");
  std::vector<TraceInput> out(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    out[i].name = out[i].checkpoint = paths[i];
    out[i].sha256 = shas[i];
    out[i].activations = acts[i];
    out[i].train_seed = static_cast<std::uint64_t>(seeds[i]);
  }
  return out;
}

IterateMatch ReadMatch(const h5::Group& g, hsize_t L1, hsize_t T1, bool excess) {
  IterateMatch m;
  for (int i = 0; i < 6; ++i) {
    const h5::Dataset ds = g.OpenDataset(kTables[i]);
    ds.ExpectDims({L1, T1});
    arma::mat rows(T1, L1);  // row-major [L1, T1]
    ds.Read(rows.memptr(), rows.n_elem);
    *Table(m, i) = rows.t();
  }
  for (int i = 0; i < 9; ++i)
    *PerLayer(m, i) = arma::vec(ReadVector(g, kPerLayer[i], L1));
  if (excess)
    for (int i = 0; i < 3; ++i)
      *Excess(m, i) = arma::vec(ReadVector(g, kExcess[i], L1));
  for (int i = 0; i < 6; ++i)
    *Rates(m, i) = g.GetDouble(kRates[i]);
  const std::int64_t rl = g.GetInt("rate_layers");
  if (rl < 0 || rl > std::int64_t(L1))
    throw Bad(g.file(), g.name() + " attribute 'rate_layers' is " + std::to_string(rl));
  m.rate_layers = int(rl);
  // The best iterate indexes the iterates: a hostile value must not reach a table or a plot as
  // an index.
  for (arma::uword l = 0; l < L1; ++l)
    for (const double b : {m.best(l), m.best_lo(l), m.best_hi(l)})
      if (!(b >= 0 && b <= double(T1 - 1)) || m.best(l) != std::floor(m.best(l)))
        throw Bad(g.file(), fmt::format("{}/best: layer {} holds {}, expected an iterate 0..{}",
                                        g.name(), l, b, T1 - 1));
  return m;
}

std::vector<arma::cube> ReadPredictions(const h5::File& f, const std::string& name,
                                        std::size_t inputs, hsize_t L1, hsize_t N, hsize_t K) {
  std::vector<arma::cube> out;
  if (inputs == 0) return out;
  const h5::Dataset ds = f.OpenDataset(name);
  ds.ExpectDims({hsize_t(inputs), L1, N, K});
  std::vector<double> v(inputs * L1 * N * K);
  ds.Read(v.data(), v.size());
  for (std::size_t s = 0; s < inputs; ++s)
    out.emplace_back(v.data() + s * L1 * N * K, K, N, L1);
  return out;
}

}  // namespace

TraceResult ReadTraceFile(const std::string& path, bool predictions) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kTraceFormat);
  TraceResult r;
  TraceRequest& q = r.request;
  try {
    q.readout = ParseReadout(f.GetString("readout"));
  } catch (const core::InputError& e) {
    throw Bad(path, "attribute 'readout': " + e.text());
  }
  r.task = data::TaskConfig::FromJson(f.GetString("task_config"), "'" + path + "' task_config");
  r.prompt_seed = static_cast<std::uint64_t>(f.GetInt("seed"));
  r.prompts_from = f.GetString("prompts_from");
  const std::int64_t N = f.GetInt("prompts"), F = f.GetInt("fit_prompts"),
                     B = f.GetInt("bootstrap_replicates");
  if (N < 2 || N > 1000000 || F < 0 || F > 1000000 || B < 10 || B > 100000)
    throw Bad(path, "attribute 'prompts', 'fit_prompts' or 'bootstrap_replicates' is out of range");
  q.prompts = int(N);
  q.fit_prompts = int(F);
  q.bootstrap = int(B);
  q.level = f.GetDouble("level");
  if (!(q.level > 0 && q.level < 1)) throw Bad(path, "attribute 'level' is outside (0, 1)");
  q.ks = IntList(f, "ks", 0, r.task.n - 1);
  const std::int64_t L = f.GetInt("model_layers");
  if (L < 1 || L > learners::kMaxLayers)
    throw Bad(path, "attribute 'model_layers' is " + std::to_string(L));
  r.model_layers = int(L);
  q.layers = IntList(f, "layers", 0, r.model_layers);
  q.algorithms = f.GetStringList("algorithms");
  if (q.algorithms.empty()) throw Bad(path, "attribute 'algorithms' is empty");
  r.learners = ReadInputs(f, "");
  r.controls = ReadInputs(f, "control_");
  if (r.learners.empty()) throw Bad(path, "attribute 'checkpoints' is empty");
  const hsize_t K = q.ks.size(), L1 = q.layers.size();
  if (q.algorithms.size() > std::size_t(kMaxTraceAlgorithms) ||
      std::set<std::string>(q.algorithms.begin(), q.algorithms.end()).size() != q.algorithms.size())
    throw Bad(path, fmt::format("attribute 'algorithms' lists more than {} algorithms or one twice",
                                kMaxTraceAlgorithms));
  // Sizes are bounded one by one; what is allocated from their products is bounded too, before
  // any allocation (a dataset can declare a shape its file never stored).
  const double inputs = double(r.learners.size() + r.controls.size());
  if (predictions && (double(N) * K > 5e8 || inputs * L1 * N * K > 5e8))
    throw Bad(path,
              "declares more predictions than a trace writes (prompts x k x layers x "
              "inputs above 5e8)");
  if (predictions) {
    const h5::Dataset lab = f.OpenDataset("labels");
    lab.ExpectDims({hsize_t(N), K});
    r.labels.set_size(K, N);
    lab.Read(r.labels.memptr(), r.labels.n_elem);
  }
  const h5::Dataset lam = f.OpenDataset("readout_lambdas");
  lam.ExpectRank(1);
  if (lam.dims()[0] < 1 || lam.dims()[0] > 10000)
    throw Bad(path, "/readout_lambdas holds no penalty or too many");
  q.lambdas = arma::vec(ReadVector(f, "readout_lambdas", lam.dims()[0]));
  if (predictions) {
    r.predictions = ReadPredictions(f, "predictions", r.learners.size(), L1, N, K);
    r.control_predictions = ReadPredictions(f, "control_predictions", r.controls.size(), L1, N, K);
  }
  for (const auto& spec : q.algorithms) {
    AlgorithmTrace a;
    try {
      a.algorithm = ParseTraceAlgorithm(spec, r.task);
    } catch (const core::InputError& e) {
      throw Bad(path, "attribute 'algorithms': " + e.text());
    }
    if (a.algorithm.spec != spec)
      throw Bad(path, "attribute 'algorithms': '" + spec.substr(0, 60) +
                          "' is not in the form "
                          "trace writes ('" +
                          a.algorithm.spec + "')");
    const h5::Group g = f.OpenGroup("trace/" + spec);
    const hsize_t T1 = a.algorithm.steps + 1;
    a.model = ReadMatch(g.OpenGroup("learner"), L1, T1, r.HasControls());
    if (r.HasControls()) a.control = ReadMatch(g.OpenGroup("control"), L1, T1, false);
    r.algorithms.push_back(std::move(a));
  }
  return r;
}

namespace {

// A CSV number: shortest round-trip form; NaN as empty (pandas reads it as NaN).
std::string Num(double v) {
  return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string();
}

template <typename F>
void ForEachMatch(const TraceResult& r, F&& f) {
  for (const auto& a : r.algorithms) {
    f(a, "learner", a.model);
    if (r.HasControls()) f(a, "control", a.control);
  }
}

}  // namespace

void WriteTraceCsv(std::ostream& os, const TraceResult& r) {
  os << "algorithm,model,layer,iterate,spd,spd_lo,spd_hi,cos,cos_lo,cos_hi\n";
  ForEachMatch(r, [&](const AlgorithmTrace& a, const char* who, const IterateMatch& m) {
    for (arma::uword l = 0; l < m.spd.n_rows; ++l)
      for (arma::uword t = 0; t < m.spd.n_cols; ++t)
        os << a.algorithm.spec << ',' << who << ',' << r.request.layers[l] << ',' << t << ','
           << Num(m.spd(l, t)) << ',' << Num(m.spd_lo(l, t)) << ',' << Num(m.spd_hi(l, t)) << ','
           << Num(m.cos(l, t)) << ',' << Num(m.cos_lo(l, t)) << ',' << Num(m.cos_hi(l, t)) << '\n';
  });
}

void WriteTraceLayersCsv(std::ostream& os, const TraceResult& r) {
  os << "algorithm,model,layer,best,best_lo,best_hi,best_spd,best_spd_lo,best_spd_hi,margin,"
        "margin_lo,margin_hi,excess,excess_lo,excess_hi\n";
  ForEachMatch(r, [&](const AlgorithmTrace& a, const char* who, const IterateMatch& m) {
    for (arma::uword l = 0; l < m.best.n_elem; ++l) {
      os << a.algorithm.spec << ',' << who << ',' << r.request.layers[l];
      for (const arma::vec* v : {&m.best, &m.best_lo, &m.best_hi, &m.best_spd, &m.best_spd_lo,
                                 &m.best_spd_hi, &m.margin, &m.margin_lo, &m.margin_hi})
        os << ',' << Num((*v)(l));
      for (const arma::vec* v : {&m.excess, &m.excess_lo, &m.excess_hi})
        os << ',' << (v->n_elem > l ? Num((*v)(l)) : "");
      os << '\n';
    }
  });
}

void WriteTraceRatesCsv(std::ostream& os, const TraceResult& r) {
  os << "algorithm,model,rate,rate_lo,rate_hi,log2_rate,log2_rate_lo,log2_rate_hi,rate_layers\n";
  ForEachMatch(r, [&](const AlgorithmTrace& a, const char* who, const IterateMatch& m) {
    os << a.algorithm.spec << ',' << who << ',' << Num(m.rate) << ',' << Num(m.rate_lo) << ','
       << Num(m.rate_hi) << ',' << Num(m.log2_rate) << ',' << Num(m.log2_rate_lo) << ','
       << Num(m.log2_rate_hi) << ',' << m.rate_layers << '\n';
  });
}

void PrintTraceSummary(std::ostream& os, const TraceResult& r) {
  os << fmt::format(
      "trace: {} learner(s){}, {} readout, {} prompts, k = {}..{}\n", r.learners.size(),
      r.HasControls() ? fmt::format(" and {} control(s)", r.controls.size()) : "",
      ReadoutName(r.request.readout), r.request.prompts, r.request.ks.front(), r.request.ks.back());
  for (const auto& a : r.algorithms) {
    const IterateMatch& m = a.model;
    os << fmt::format("  {}: best iterate per layer (spd similarity{})\n", a.algorithm.spec,
                      r.HasControls() ? "; excess over the control" : "");
    for (arma::uword l = 0; l < m.best.n_elem; ++l) {
      os << fmt::format("    layer {:2d}: iterate {:g} [{:g}, {:g}]  spd {:.3f} [{:.3f}, {:.3f}]",
                        r.request.layers[l], m.best(l), m.best_lo(l), m.best_hi(l), m.best_spd(l),
                        m.best_spd_lo(l), m.best_spd_hi(l));
      if (r.HasControls())
        os << fmt::format("  excess {:+.3f} [{:+.3f}, {:+.3f}]", m.excess(l), m.excess_lo(l),
                          m.excess_hi(l));
      os << "\n";
    }
    os << fmt::format(
        "    rate {} iterations/layer [{}, {}], {} doublings/layer [{}, {}] over {} "
        "layers\n",
        Num(m.rate), Num(m.rate_lo), Num(m.rate_hi), Num(m.log2_rate), Num(m.log2_rate_lo),
        Num(m.log2_rate_hi), m.rate_layers);
  }
}

}  // namespace icl::analysis
