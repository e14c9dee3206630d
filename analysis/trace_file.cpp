// trace.h5 and its CSVs (trace_file.hpp holds the schema).
#include "analysis/trace_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/errors.hpp"
#include "formats/reader.hpp"
#include "formats/writer.hpp"

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

constexpr const char* kMatch = "trace/<spec>/<side>";
std::string InMatch(const char* name) {
  return std::string(kMatch) + "/" + name;
}

void WriteMatch(formats::Writer& f, const formats::Fill& fill, const IterateMatch& m, bool excess) {
  const formats::Sizes sizes = {{"layer", m.spd.n_rows}, {"iterate", m.spd.n_cols}};
  for (int i = 0; i < 6; ++i) {
    const arma::mat rows = Table(m, i).t();  // column-major T1 x L1 == row-major [L1, T1]
    f.Write(InMatch(kTables[i]), sizes, rows.memptr(), rows.n_elem, fill);
  }
  IterateMatch& mm = const_cast<IterateMatch&>(m);
  for (int i = 0; i < 9; ++i)
    f.Write(InMatch(kPerLayer[i]), sizes, PerLayer(mm, i)->memptr(), PerLayer(mm, i)->n_elem, fill);
  if (excess)
    for (int i = 0; i < 3; ++i)
      f.Write(InMatch(kExcess[i]), sizes, Excess(mm, i)->memptr(), Excess(mm, i)->n_elem, fill);
  for (int i = 0; i < 6; ++i)
    f.SetAttr(kRates[i], *Rates(mm, i), kMatch, fill);
  f.SetAttr("rate_layers", m.rate_layers, kMatch, fill);
}

void WriteInputs(formats::Writer& f, const std::string& prefix, const std::vector<TraceInput>& in) {
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

// `axis` is the first dimension's size name: seed (the learners) or control.
void WritePredictions(formats::Writer& f, const std::string& name, const std::string& axis,
                      const std::vector<arma::cube>& cubes) {
  if (cubes.empty()) return;
  const arma::cube& c = cubes[0];
  std::vector<double> v;
  v.reserve(cubes.size() * c.n_elem);
  for (const auto& x : cubes)  // cube (K, N, L') column-major == row-major [L', N, K]
    v.insert(v.end(), x.begin(), x.end());
  f.Write(name,
          {{axis, cubes.size()}, {"layer", c.n_slices}, {"prompt", c.n_cols}, {"k", c.n_rows}}, v);
}

}  // namespace

void WriteTraceFile(const std::string& path, const TraceResult& r) {
  formats::Writer f(path, formats::TraceSchema());
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
  f.SetAttr("ks", q.ks);
  f.SetAttr("layers", q.layers);
  f.SetAttr("model_layers", r.model_layers);
  f.SetAttr("algorithms", q.algorithms);
  WriteInputs(f, "", r.learners);
  WriteInputs(f, "control_", r.controls);
  const arma::mat labels = r.labels;  // K x N column-major == row-major [N, K]
  f.Write("labels", {{"prompt", labels.n_cols}, {"k", labels.n_rows}}, labels.memptr(),
          labels.n_elem);
  f.Write("readout_lambdas", {{"lambda", q.lambdas.n_elem}}, q.lambdas.memptr(), q.lambdas.n_elem);
  WritePredictions(f, "predictions", "seed", r.predictions);
  WritePredictions(f, "control_predictions", "control", r.control_predictions);
  for (const auto& a : r.algorithms) {
    const formats::Fill fill = {{"spec", a.algorithm.spec}};
    f.SetAttr("spec", a.algorithm.spec, "trace/<spec>", fill);
    f.SetAttr("family", a.algorithm.family, "trace/<spec>", fill);
    f.SetAttr("steps", a.algorithm.steps, "trace/<spec>", fill);
    WriteMatch(f, {{"spec", a.algorithm.spec}, {"side", "learner"}}, a.model, r.HasControls());
    if (r.HasControls())
      WriteMatch(f, {{"spec", a.algorithm.spec}, {"side", "control"}}, a.control, false);
  }
  f.Close();
}

namespace {

core::InputError Bad(const std::string& path, const std::string& what) {
  return core::InputError("'" + path + "'", "", what);
}

std::vector<int> IntList(const formats::Reader& f, const std::string& attr, int lo, int hi) {
  const std::string path = f.file().file();
  std::vector<int> out;
  for (const std::int64_t v : f.IntList(attr)) {
    if (v < lo || v > hi)
      throw Bad(path, fmt::format("attribute '{}' holds {}, outside {}..{}", attr, v, lo, hi));
    out.push_back(int(v));
  }
  if (out.empty()) throw Bad(path, "attribute '" + attr + "' is empty");
  if (std::set<int>(out.begin(), out.end()).size() != out.size())
    throw Bad(path, "attribute '" + attr + "' lists an entry twice");
  return out;
}

std::vector<TraceInput> ReadInputs(const formats::Reader& f, const std::string& prefix) {
  const auto paths = f.StringList(prefix + "checkpoints");
  const auto shas = f.StringList(prefix + "checkpoint_sha256");
  const auto acts = f.StringList(prefix + "activations");
  const auto seeds = f.IntList(prefix + "seeds");
  if (shas.size() != paths.size() || acts.size() != paths.size() || seeds.size() != paths.size())
    throw Bad(f.file().file(), "attributes '" + prefix + "checkpoints', '" + prefix +
                                   "checkpoint_sha256', '" + prefix + "activations' and '" +
                                   prefix + "seeds' differ in length");
  std::vector<TraceInput> out(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    out[i].name = out[i].checkpoint = paths[i];
    out[i].sha256 = shas[i];
    out[i].activations = acts[i];
    out[i].train_seed = static_cast<std::uint64_t>(seeds[i]);
  }
  return out;
}

IterateMatch ReadMatch(const formats::Reader& f, const formats::Fill& fill, hsize_t L1, hsize_t T1,
                       bool excess) {
  const formats::Sizes sizes = {{"layer", L1}, {"iterate", T1}};
  const std::string name = "/" + formats::FillPath(kMatch, fill);
  IterateMatch m;
  for (int i = 0; i < 6; ++i) {
    const std::vector<double> v = f.Read(InMatch(kTables[i]), sizes, fill);
    *Table(m, i) = arma::mat(v.data(), T1, L1).t();  // row-major [L1, T1]
  }
  for (int i = 0; i < 9; ++i)
    *PerLayer(m, i) = arma::vec(f.Read(InMatch(kPerLayer[i]), sizes, fill));
  if (excess)
    for (int i = 0; i < 3; ++i)
      *Excess(m, i) = arma::vec(f.Read(InMatch(kExcess[i]), sizes, fill));
  for (int i = 0; i < 6; ++i)
    *Rates(m, i) = f.Double(kRates[i], kMatch, fill);
  const std::int64_t rl = f.Int("rate_layers", kMatch, fill);
  if (rl < 0 || rl > std::int64_t(L1))
    throw Bad(f.file().file(), name + " attribute 'rate_layers' is " + std::to_string(rl));
  m.rate_layers = int(rl);
  // The best iterate indexes the iterates: a hostile value must not reach a table or a plot as
  // an index.
  for (arma::uword l = 0; l < L1; ++l)
    for (const double b : {m.best(l), m.best_lo(l), m.best_hi(l)})
      if (!(b >= 0 && b <= double(T1 - 1)) || m.best(l) != std::floor(m.best(l)))
        throw Bad(f.file().file(),
                  fmt::format("{}/best: layer {} holds {}, expected an iterate 0..{}", name, l, b,
                              T1 - 1));
  return m;
}

std::vector<arma::cube> ReadPredictions(const formats::Reader& f, const std::string& name,
                                        const std::string& axis, std::size_t inputs, hsize_t L1,
                                        hsize_t N, hsize_t K) {
  std::vector<arma::cube> out;
  if (inputs == 0) return out;
  const std::vector<double> v =
      f.Read(name, {{axis, inputs}, {"layer", L1}, {"prompt", N}, {"k", K}});
  for (std::size_t s = 0; s < inputs; ++s)
    out.emplace_back(v.data() + s * L1 * N * K, K, N, L1);
  return out;
}

}  // namespace

TraceResult ReadTraceFile(const std::string& path, bool predictions) {
  const formats::Reader f(path, formats::TraceSchema());
  TraceResult r;
  TraceRequest& q = r.request;
  try {
    q.readout = ParseReadout(f.String("readout"));
  } catch (const core::InputError& e) {
    throw Bad(path, "attribute 'readout': " + e.text());
  }
  r.task = data::TaskConfig::FromJson(f.String("task_config"), "'" + path + "' task_config");
  r.prompt_seed = static_cast<std::uint64_t>(f.Int("seed"));
  r.prompts_from = f.String("prompts_from");
  const std::int64_t N = f.Int("prompts"), F = f.Int("fit_prompts"),
                     B = f.Int("bootstrap_replicates");
  if (N < 2 || N > 1000000 || F < 0 || F > 1000000 || B < 10 || B > 100000)
    throw Bad(path, "attribute 'prompts', 'fit_prompts' or 'bootstrap_replicates' is out of range");
  q.prompts = int(N);
  q.fit_prompts = int(F);
  q.bootstrap = int(B);
  q.level = f.Double("level");
  if (!(q.level > 0 && q.level < 1)) throw Bad(path, "attribute 'level' is outside (0, 1)");
  q.ks = IntList(f, "ks", 0, r.task.n - 1);
  const std::int64_t L = f.Int("model_layers");
  if (L < 1 || L > learners::kMaxLayers)
    throw Bad(path, "attribute 'model_layers' is " + std::to_string(L));
  r.model_layers = int(L);
  q.layers = IntList(f, "layers", 0, r.model_layers);
  q.algorithms = f.StringList("algorithms");
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
    const std::vector<double> labels = f.Read("labels", {{"prompt", hsize_t(N)}, {"k", K}});
    r.labels = arma::mat(labels.data(), K, N);  // row-major [N, K]
  }
  const unsigned long long lambdas = f.Dims("readout_lambdas")[0];
  if (lambdas < 1 || lambdas > 10000)
    throw Bad(path, "/readout_lambdas holds no penalty or too many");
  q.lambdas = arma::vec(f.Read("readout_lambdas", {{"lambda", lambdas}}));
  if (predictions) {
    r.predictions = ReadPredictions(f, "predictions", "seed", r.learners.size(), L1, N, K);
    r.control_predictions =
        ReadPredictions(f, "control_predictions", "control", r.controls.size(), L1, N, K);
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
    const hsize_t T1 = a.algorithm.steps + 1;
    a.model = ReadMatch(f, {{"spec", spec}, {"side", "learner"}}, L1, T1, r.HasControls());
    if (r.HasControls())
      a.control = ReadMatch(f, {{"spec", spec}, {"side", "control"}}, L1, T1, false);
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
