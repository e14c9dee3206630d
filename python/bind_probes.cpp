// The Python module's probing runs on arrays (PlanProbesInMemory and RunProbes over MemorySources,
// as the CLI's probe runs them), their settings and results, and probes files.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <armadillo>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/output.hpp"
#include "core/thread_pool.hpp"
#include "data/task.hpp"
#include "extract/activations.hpp"
#include "probes/probes_file.hpp"
#include "probes/runner.hpp"
#include "probes/uncertainty.hpp"
#include "python/arrays.hpp"
#include "python/bindings.hpp"
#include "python/long_call.hpp"
#include "python/probe_results.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

// What a Python call asks of a probing run: the names and lists a user writes, which probes/
// parses as it does the CLI's options, and the request's own settings, whose defaults are the
// library's (ProbeRequest's).
struct ProbeSettings {
  std::vector<std::string> probes = {"ridge"};  // families: ridge, linear, mlp
  // The T axis: y (the state after k = 1..K) or all; "": as the arrays' shapes say
  // (probes::InferPositions).
  std::string positions;
  std::string at = "state";                    // state, query or both (query: positions all)
  std::string pooling = "attention";           // linear/mlp input: attention or position
  std::optional<std::string> lambda_grid;      // "LO:HI:COUNT" or "a,b,c" (ParseLambdaGrid)
  std::optional<std::vector<double>> lambdas;  // the grid's values
  std::optional<std::vector<double>> split;    // train, validation, test fractions
  std::optional<std::vector<double>> codelength_blocks;
  int threads = 1;
  std::string name = "hidden";        // names the main source in messages and family reports
  icl::probes::ProbeRequest request;  // seed(s), bootstrap, controls' switches, gradient probes
};

struct ProbeArrays {
  py::array hidden;                                         // [N, L, T, F]
  std::map<std::string, py::array> targets;                 // name -> [N, K, D] or [N, D]
  std::vector<std::pair<std::string, py::array>> controls;  // name -> [N, L, T, F]
  std::vector<int> layers;                                  // labels of the L axis
  std::vector<int> ks;                                      // labels of the K axis; empty: 1..K
};

// The request the CLI's probe would build from `s`: the same parsers, the same Validate (in
// PlanProbesInMemory).
icl::probes::ProbeRequest RequestOf(const ProbeSettings& s) {
  namespace pr = icl::probes;
  pr::ProbeRequest r = s.request;
  r.families = pr::ParseFamilies(ListArgument("probes", s.probes));
  r.pooled = pr::ParsePooling(s.pooling);
  r.at = pr::ParseProbeAt(s.at);
  if (s.lambda_grid && s.lambdas)
    throw InputError("iclprobe", "lambdas", "give the grid as a text or as values, not both");
  if (s.lambda_grid) r.lambdas = pr::ParseLambdaGrid(*s.lambda_grid);
  if (s.lambdas) r.lambdas = arma::vec(*s.lambdas);
  if (s.split) r.split = pr::SplitFractions(*s.split);
  if (s.codelength_blocks) r.codelength_fractions = *s.codelength_blocks;
  if (s.threads < 1) throw InputError("iclprobe", "threads", "must be at least 1");
  return r;
}

// A setting of the request (or of its gradient probes) as an attribute of ProbeSettings.
template <typename T>
void BindRequestField(py::class_<ProbeSettings>& c, const char* name,
                      T icl::probes::ProbeRequest::*field) {
  c.def_property(
      name, [field](const ProbeSettings& s) { return s.request.*field; },
      [field](ProbeSettings& s, const T& v) { s.request.*field = v; });
}
template <typename T>
void BindGradientField(py::class_<ProbeSettings>& c, const char* name,
                       T icl::probes::GradientProbeOptions::*field) {
  c.def_property(
      name, [field](const ProbeSettings& s) { return s.request.gradient.*field; },
      [field](ProbeSettings& s, const T& v) { s.request.gradient.*field = v; });
}

// The arrays of one source, read where they lie: hidden [N, L, T, F] float32 (the precision a
// file stores); layer l of prompt i is T * F floats at (i * L + l) * T * F, the column of a
// file's reader. `h` must outlive the run.
std::shared_ptr<icl::probes::MemorySource> HiddenSource(
    const py::array_t<float, py::array::c_style>& h, const std::vector<int>& layers) {
  const py::ssize_t L = h.shape(1), T = h.shape(2), F = h.shape(3);
  auto src = std::make_shared<icl::probes::MemorySource>();
  for (py::ssize_t l = 0; l < L; ++l)
    src->hidden[layers[l]] = {h.data(0, l, 0, 0), std::int64_t(L * T * F)};
  return src;
}

// One probing run on arrays: the runner's output and what describes it, so that its results
// can be tabled, analysed as a probes file's (in memory) and saved as one.
class ProbeRun {
 public:
  ProbeRun(icl::probes::ProbeRequest request, icl::probes::StatesInfo info,
           icl::probes::ProbeOutput output)
      : request_(std::move(request)), info_(std::move(info)), out_(std::move(output)) {}
  int threads = 1;  // the workers the run had (core::WorkerCount of the request)

  // One row per (target, probe, source, layer, k, seed).
  py::dict Table() const {
    const std::size_t R = out_.records.size();
    std::vector<std::string> target(R), probe(R), source(R);
    py::array_t<int> layer(R), k(R), seed_col(R), epochs(R);
    py::array_t<double> r2(R), r2_lo(R), r2_hi(R), nmse(R), nmse_lo(R), nmse_hi(R), mse(R), lam(R),
        bits(R), uniform(R);
    for (std::size_t i = 0; i < R; ++i) {
      const auto& rec = out_.records[i];
      target[i] = rec.target, probe[i] = rec.probe, source[i] = rec.source;
      layer.mutable_at(i) = rec.layer, k.mutable_at(i) = rec.k, seed_col.mutable_at(i) = rec.seed;
      epochs.mutable_at(i) = rec.epochs;
      r2.mutable_at(i) = rec.r2, r2_lo.mutable_at(i) = rec.r2_lo, r2_hi.mutable_at(i) = rec.r2_hi;
      nmse.mutable_at(i) = rec.nmse, nmse_lo.mutable_at(i) = rec.nmse_lo,
      nmse_hi.mutable_at(i) = rec.nmse_hi;
      mse.mutable_at(i) = rec.mse, lam.mutable_at(i) = rec.lambda;
      bits.mutable_at(i) = rec.code_bits, uniform.mutable_at(i) = rec.uniform_bits;
    }
    // String columns as numpy arrays too, so that `table["source"] == "model"` is elementwise.
    const py::object np_array = py::module_::import("numpy").attr("array");
    py::dict t;
    t["target"] = np_array(target), t["probe"] = np_array(probe), t["source"] = np_array(source);
    t["layer"] = layer, t["k"] = k, t["seed"] = seed_col;
    t["r2"] = r2, t["r2_lo"] = r2_lo, t["r2_hi"] = r2_hi;
    t["nmse"] = nmse, t["nmse_lo"] = nmse_lo, t["nmse_hi"] = nmse_hi;
    t["mse"] = mse, t["lambda"] = lam, t["epochs"] = epochs;
    if (request_.codelength) t["code_bits"] = bits, t["uniform_bits"] = uniform;
    return t;
  }
  // [rows of Table, test prompts]: the probe's squared errors and the test mean's.
  py::tuple PerPrompt() const {
    const std::size_t R = out_.records.size();
    const py::ssize_t T = R ? py::ssize_t(out_.records[0].sse.n_elem) : 0;
    py::array_t<double> sse({py::ssize_t(R), T}), sst({py::ssize_t(R), T});
    for (std::size_t i = 0; i < R; ++i) {
      std::memcpy(sse.mutable_data(i, 0), out_.records[i].sse.memptr(), sizeof(double) * T);
      std::memcpy(sst.mutable_data(i, 0), out_.records[i].sst.memptr(), sizeof(double) * T);
    }
    return py::make_tuple(sse, sst);
  }
  // R2(model) - R2(control) per cell of every control source, with a paired percentile interval
  // (both scores on the same bootstrap resamples of the seed's test prompts).
  py::dict Selectivity() const {
    namespace pr = icl::probes;
    std::map<std::tuple<std::string, std::string, int, int, int>, std::size_t> model_row;
    const auto& recs = out_.records;
    for (std::size_t i = 0; i < recs.size(); ++i)
      if (recs[i].source == "model")
        model_row[{recs[i].target, recs[i].probe, recs[i].layer, recs[i].k, recs[i].seed}] = i;
    const arma::uword T = recs.empty() ? 0 : recs[0].sse.n_elem;
    const pr::Bootstrap boot(T, request_.seeds, request_.bootstrap, request_.seed);
    std::vector<std::string> s_target, s_probe, s_control;
    std::vector<int> s_layer, s_k, s_seed;
    std::vector<double> s_val, s_lo, s_hi;
    for (const auto& c : recs) {
      if (c.source == "model") continue;
      const auto& m = recs[model_row.at({c.target, c.probe, c.layer, c.k, c.seed})];
      const arma::vec diff = boot.R2(m.seed, m.sse, m.sst) - boot.R2(c.seed, c.sse, c.sst);
      const pr::Interval iv = pr::PercentileInterval(diff);
      s_target.push_back(c.target), s_probe.push_back(c.probe), s_control.push_back(c.source);
      s_layer.push_back(c.layer), s_k.push_back(c.k), s_seed.push_back(c.seed);
      s_val.push_back(m.r2 - c.r2), s_lo.push_back(iv.lo), s_hi.push_back(iv.hi);
    }
    const py::object np_array = py::module_::import("numpy").attr("array");
    py::dict sel;
    sel["target"] = np_array(s_target), sel["probe"] = np_array(s_probe);
    sel["control"] = np_array(s_control);
    sel["layer"] = py::array(py::cast(s_layer)), sel["k"] = py::array(py::cast(s_k));
    sel["seed"] = py::array(py::cast(s_seed)), sel["selectivity"] = py::array(py::cast(s_val));
    sel["lo"] = py::array(py::cast(s_lo)), sel["hi"] = py::array(py::cast(s_hi));
    return sel;
  }
  py::list Ridge() const {
    py::list weights;
    for (const auto& w : out_.ridge) {
      py::dict d;
      d["target"] = w.target, d["source"] = w.source, d["layer"] = w.layer;
      d["k"] = w.k, d["seed"] = w.seed, d["lambda"] = w.lambda;
      d["weights"] = ToNumpy(arma::mat(w.weights.t()));  // p x m: numpy [F, D]
      d["intercept"] = ToNumpy(w.intercept);
      d["loo_mse"] = ToNumpy(w.loo_mse);
      d["feature_scale"] = ToNumpy(w.feature_scale);
      weights.append(d);
    }
    return weights;
  }
  // Attention-pooling weights of the linear and MLP probes over the positions up to the one read.
  py::list Pooling() const {
    py::list out;
    for (const auto& a : out_.alphas) {
      py::dict d;
      d["target"] = a.target, d["probe"] = a.probe, d["source"] = a.source;
      d["layer"] = a.layer, d["k"] = a.k, d["seed"] = a.seed, d["alpha"] = ToNumpy(a.alpha);
      out.append(d);
    }
    return out;
  }
  py::list Roles() const {
    py::list roles;
    for (const auto& r8 : out_.roles) {
      py::array_t<std::uint8_t> a(py::ssize_t(r8.size()));
      std::memcpy(a.mutable_data(), r8.data(), r8.size());
      roles.append(a);
    }
    return roles;
  }
  std::string RequestJson() const { return request_.ToJson(); }
  // As a probes file's results (written to memory by the file's writer, read back by its
  // reader), built once.
  const Probes& Results() {
    if (!results_)
      results_ = std::make_unique<Probes>(icl::probes::ProbeResultsInMemory(request_, out_, info_));
    return *results_;
  }
  // Writes a probes.h5 as `iclprobe probe --out` does (a temporary name, renamed when
  // complete; an existing file only with force).
  void Save(const std::string& path, bool force) const {
    icl::core::AtomicOutput out(path, "path", icl::core::OutputOptions{force, {}, false, true});
    {
      py::gil_scoped_release release;
      icl::probes::WriteProbesFile(out.temp_path(), request_, out_, info_);
    }
    out.Commit();
  }

 private:
  icl::probes::ProbeRequest request_;
  icl::probes::StatesInfo info_;
  icl::probes::ProbeOutput out_;
  std::unique_ptr<Probes> results_;
};

// The labels of the K axis: `given`, or 1..K when none are given (with positions all, the only
// ones: k counts the examples the T axis holds).
std::vector<int> KLabels(const std::vector<int>& given, py::ssize_t K, bool all) {
  std::vector<int> ks = given;
  if (ks.empty())
    for (int k = 1; k <= int(K); ++k)
      ks.push_back(k);
  else if (all)
    throw InputError("iclprobe", "ks", "with positions all the k axis is 1..K; leave ks out");
  std::vector<int> sorted = ks;
  std::sort(sorted.begin(), sorted.end());
  if (py::ssize_t(ks.size()) != K ||
      std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw InputError("iclprobe", "ks",
                     "expected " + std::to_string(K) + " distinct labels for the K axis, got " +
                         std::to_string(ks.size()) + " labels");
  for (int k : ks)
    if (k < 1 || k > icl::data::kMaxN)
      throw InputError("iclprobe", "ks",
                       "labels must be in 1.." + std::to_string(icl::data::kMaxN));
  return ks;
}

// The targets as the runner holds them, per k (Target::values[k-1], D x N): [N, K, D] arrays,
// or [N, D] ones that hold the same value after every k.
std::map<std::string, icl::probes::Target> MemoryTargets(const ProbeArrays& in, py::ssize_t N,
                                                         py::ssize_t K, const std::string& hidden) {
  std::map<std::string, icl::probes::Target> out;
  for (const auto& [name, arr] : in.targets) {
    const std::string arg = "targets['" + name.substr(0, 40) + "']";
    if (!icl::core::IsPlainName(name))
      throw InputError("iclprobe", "targets",
                       "'" + name.substr(0, 40) + "' is not a plain name (letters, digits, _ . -)");
    const bool per_k = arr.ndim() != 2;
    const auto t = FloatArray<double>(arr, arg, per_k ? 3 : 2, per_k ? "[N, K, D]" : "[N, D]");
    if (t.shape(0) != N || (per_k && t.shape(1) != K))
      throw InputError("iclprobe", arg,
                       "expected [" + std::to_string(N) + (per_k ? ", " + std::to_string(K) : "") +
                           ", D] to match hidden " + hidden + ", got " +
                           Shape(std::vector<py::ssize_t>(t.shape(), t.shape() + t.ndim())));
    const py::ssize_t D = t.shape(t.ndim() - 1);
    if (D < 1) throw InputError("iclprobe", arg, "has no entries (D = 0)");
    icl::probes::Target target{name, arma::uword(D), {}};
    for (py::ssize_t k = 0; k < K; ++k) {
      arma::mat v(D, N);
      for (py::ssize_t i = 0; i < N; ++i)
        for (py::ssize_t j = 0; j < D; ++j)
          v(j, i) = per_k ? t.at(i, k, j) : t.at(i, j);
      target.values.push_back(std::move(v));
    }
    out[name] = std::move(target);
  }
  return out;
}

std::unique_ptr<ProbeRun> Probe(const ProbeArrays& in, const ProbeSettings& s,
                                const py::object& progress) {
  namespace pr = icl::probes;
  pr::ProbeRequest r = RequestOf(s);
  const auto h = FloatArray<float>(in.hidden, "hidden", 4, "[N, L, T, F]");
  const py::ssize_t N = h.shape(0), L = h.shape(1), T = h.shape(2), F = h.shape(3);
  if (N < 1 || L < 1 || T < 1 || F < 1)
    throw InputError("iclprobe", "hidden", "has an empty dimension: " + Shape({N, L, T, F}));
  if (py::ssize_t(in.layers.size()) != L)
    throw std::logic_error("iclprobe: layer labels do not match the hidden states");
  // Each target's name and entries D (an array of another rank is refused below, by name).
  std::vector<std::pair<std::string, int>> shapes;
  for (const auto& [name, arr] : in.targets)
    shapes.emplace_back(name,
                        arr.ndim() == 2 || arr.ndim() == 3 ? int(arr.shape(arr.ndim() - 1)) : 1);
  int target_k = 0;  // the K axis of the per-k targets, which with T tells the layout
  for (const auto& [name, arr] : in.targets)
    if (arr.ndim() == 3 && target_k == 0) target_k = int(arr.shape(1));
  const auto positions = s.positions.empty() ? pr::InferPositions(int(T), target_k)
                                             : icl::extract::ParsePositions(s.positions);
  pr::StatesInfo info = pr::DescribeArrays(s.name, N, in.layers, int(T), int(F), positions, shapes);
  const py::ssize_t K = info.n;
  const std::vector<int> ks = KLabels(in.ks, K, positions == icl::extract::Positions::kAll);

  auto model = HiddenSource(h, in.layers);
  model->targets = MemoryTargets(in, N, K, Shape({N, L, T, F}));
  r.activations = s.name;
  r.targets.clear();
  for (const auto& [name, target] : model->targets)
    r.targets.push_back(name);
  std::vector<pr::StatesInfo> infos = {info};
  std::vector<std::shared_ptr<const pr::MemorySource>> memory = {model};
  std::vector<py::array_t<float, py::array::c_style>> kept;  // the controls' states, read in place
  for (const auto& [name, arr] : in.controls) {
    const std::string arg = "controls['" + name.substr(0, 40) + "']";
    if (!icl::core::IsPlainName(name) || name.find('.') != std::string::npos || name == s.name)
      throw InputError("iclprobe", "controls",
                       "'" + name.substr(0, 40) +
                           "' is not a plain name (letters, digits, _ -) other than the model's");
    const auto& c = kept.emplace_back(FloatArray<float>(arr, arg, 4, "[N, L, T, F]"));
    if (c.shape(0) != N || c.shape(1) != L || c.shape(2) != T || c.shape(3) != F)
      throw InputError("iclprobe", arg,
                       "expected the shape of hidden " + Shape({N, L, T, F}) + ", got " +
                           Shape({c.shape(0), c.shape(1), c.shape(2), c.shape(3)}));
    auto src = HiddenSource(c, in.layers);
    src->targets = model->targets;  // the same prompts, so the same targets
    pr::StatesInfo ci = info;
    ci.name = name;
    infos.push_back(ci);
    memory.push_back(src);
    r.controls.push_back(name);
  }
  // The CLI's rule for --threads: at most the usable cores.
  const int workers = icl::core::WorkerCount(s.threads);
  pr::ProbeOutput out = Interruptible<pr::ProbeOutput>(progress, [&](const Tick& tick) {
    const SerialKernels serial;  // the CLI's probe keeps BLAS serial too
    const pr::ProbePlan plan = pr::PlanProbesInMemory(r, infos, memory);
    r = plan.request;  // defaults resolved (layers, k)
    icl::core::ThreadPool pool(workers);
    return pr::RunProbes(plan, pool, tick);
  });
  pr::RelabelKs(ks, r, out, info);  // the results carry the caller's k labels
  auto run = std::make_unique<ProbeRun>(std::move(r), std::move(info), std::move(out));
  run->threads = workers;
  return run;
}

}  // namespace

// Probing runs on arrays, their settings, and probes files (read, or a run's in memory).
void BindProbes(py::module_& m) {
  py::class_<ProbeArrays>(m, "ProbeArrays")
      .def(py::init<>())
      .def_readwrite("hidden", &ProbeArrays::hidden)
      .def_readwrite("targets", &ProbeArrays::targets)
      .def_readwrite("controls", &ProbeArrays::controls)
      .def_readwrite("layers", &ProbeArrays::layers)
      .def_readwrite("ks", &ProbeArrays::ks);
  py::class_<ProbeSettings> settings(m, "ProbeSettings");
  settings.def(py::init<>())
      .def_readwrite("probes", &ProbeSettings::probes)
      .def_readwrite("positions", &ProbeSettings::positions)
      .def_readwrite("at", &ProbeSettings::at)
      .def_readwrite("pooling", &ProbeSettings::pooling)
      .def_readwrite("lambda_grid", &ProbeSettings::lambda_grid)
      .def_readwrite("lambdas", &ProbeSettings::lambdas)
      .def_readwrite("split", &ProbeSettings::split)
      .def_readwrite("threads", &ProbeSettings::threads)
      .def_readwrite("codelength_blocks", &ProbeSettings::codelength_blocks)
      .def_readwrite("name", &ProbeSettings::name);
  namespace pr = icl::probes;
  BindRequestField(settings, "seed", &pr::ProbeRequest::seed);
  BindRequestField(settings, "seeds", &pr::ProbeRequest::seeds);
  BindRequestField(settings, "bootstrap", &pr::ProbeRequest::bootstrap);
  BindRequestField(settings, "shuffle_control", &pr::ProbeRequest::shuffle_control);
  BindRequestField(settings, "codelength", &pr::ProbeRequest::codelength);
  BindGradientField(settings, "mlp_hidden", &pr::GradientProbeOptions::mlp_hidden);
  BindGradientField(settings, "epochs", &pr::GradientProbeOptions::max_epochs);
  BindGradientField(settings, "patience", &pr::GradientProbeOptions::patience);
  BindGradientField(settings, "batch", &pr::GradientProbeOptions::batch);
  BindGradientField(settings, "lr", &pr::GradientProbeOptions::lr);
  // The library's split and grid, for the Python signature's defaults and their test.
  settings.def_property_readonly("default_split", [](const ProbeSettings& s) {
    return std::vector<double>(s.request.split.begin(), s.request.split.end());
  });

  py::class_<Probes>(m, "Probes")
      .def(py::init([](const std::string& path) {
             return std::make_unique<Probes>(icl::probes::ReadProbesFile(path));
           }),
           py::arg("path"))
      .def_property_readonly("path", [](const Probes& p) { return p.results().path; })
      .def_property_readonly("targets", [](const Probes& p) { return p.results().targets; })
      .def_property_readonly("probes", [](const Probes& p) { return p.results().probes; })
      .def_property_readonly("sources", [](const Probes& p) { return p.results().sources; })
      .def_property_readonly("layers", [](const Probes& p) { return p.results().layers; })
      .def_property_readonly("ks", [](const Probes& p) { return p.results().ks; })
      .def_property_readonly("seeds", [](const Probes& p) { return p.results().seeds; })
      .def("metric", &Probes::Metric, py::arg("target"), py::arg("probe"), py::arg("source"),
           py::arg("metric"))
      .def("onsets", &Probes::Onsets, py::arg("k"), py::arg("threshold"), py::arg("relative"),
           py::arg("margin"))
      .def("ridge", &Probes::Ridge, py::arg("target"), py::arg("layer"), py::arg("k"),
           py::arg("seed"), py::arg("source"));

  py::class_<ProbeRun>(m, "ProbeRun")
      .def("table", &ProbeRun::Table)
      .def("per_prompt", &ProbeRun::PerPrompt)
      .def("selectivity", &ProbeRun::Selectivity)
      .def("ridge", &ProbeRun::Ridge)
      .def("pooling", &ProbeRun::Pooling)
      .def("roles", &ProbeRun::Roles)
      .def("request", &ProbeRun::RequestJson)
      .def("results", &ProbeRun::Results, py::return_value_policy::reference_internal)
      .def("save", &ProbeRun::Save, py::arg("path"), py::arg("force"))
      .def_readonly("threads", &ProbeRun::threads);
  m.def("probe", &Probe, py::arg("arrays"), py::arg("settings"), py::arg("progress"));
  m.def(
      "family_report",
      [](const std::vector<std::pair<std::string, const Probes*>>& learners, int k,
         double threshold, double relative,
         double margin) { return FamilyReport(learners, k, threshold, relative, margin); },
      py::arg("learners"), py::arg("k"), py::arg("threshold"), py::arg("relative"),
      py::arg("margin"));
}

}  // namespace icl::python
