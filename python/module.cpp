// The Python extension `iclprobe._core`: numpy arrays in, numpy arrays out, over the libraries
// the CLI calls (the same ridge probes, bootstrap, targets and file readers; no second
// implementation). iclprobe/__init__.py is the documented face; this file converts and checks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/version.h>

#include <algorithm>
#include <armadillo>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/report.hpp"
#include "analysis/trace_file.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/names.hpp"
#include "core/output.hpp"
#include "core/process.hpp"
#include "core/spec.hpp"
#include "core/thread_pool.hpp"
#include "core/version.hpp"
#include "data/targets.hpp"
#include "data/task.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"
#include "extract/extract.hpp"
#include "extract/forward.hpp"
#include "intervene/das.hpp"
#include "intervene/erase.hpp"
#include "intervene/intervene.hpp"
#include "intervene/swap.hpp"
#include "learners/checkpoint.hpp"
#include "learners/model_config.hpp"
#include "probes/probes_file.hpp"
#include "probes/runner.hpp"
#include "probes/uncertainty.hpp"

namespace py = pybind11;

extern "C" int openblas_get_num_threads(void);
extern "C" void openblas_set_num_threads(int num_threads);

std::string FileKind(const std::string& path);

namespace {

using icl::core::InputError;

// ---- long calls: Ctrl-C and progress ----

// What a progress tick throws once the caller has been interrupted.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "iclprobe: cancelled"; }
};
using Tick = std::function<void(double done, double total)>;

// Runs work(tick) on a thread of its own while the calling thread (Python's, holding the GIL on
// entry) waits without the GIL, waking every 0.1 s to look for Ctrl-C (PyErr_CheckSignals:
// signal handlers run only on Python's main thread) and to pass the latest progress to
// `callback` (None: no reports). On KeyboardInterrupt, or an exception from the callback, the
// work stops at its next tick and the Python exception is raised once it has. The work must not
// touch Python objects.
template <class R>
R Interruptible(const py::object& callback, const std::function<R(const Tick&)>& work) {
  std::atomic<bool> cancel{false};
  std::mutex m;
  double done = 0, total = 0;
  bool fresh = false;
  const Tick tick = [&](double d, double t) {
    if (cancel.load()) throw Cancelled();
    const std::lock_guard<std::mutex> lock(m);
    done = d, total = t, fresh = true;
  };
  std::future<R> result = std::async(std::launch::async, [&] { return work(tick); });
  auto report = [&] {
    double d, t;
    {
      const std::lock_guard<std::mutex> lock(m);
      if (!fresh) return;
      d = done, t = total, fresh = false;
    }
    callback(d, t);
  };
  auto stop = [&] {  // the Python error is set; wait for the work to notice, then raise it
    cancel = true;
    {
      const py::gil_scoped_release release;
      result.wait();
    }
    try {
      result.get();
    } catch (...) {  // Cancelled, or whatever the work was doing: the interrupt is what counts
    }
    throw py::error_already_set();
  };
  for (;;) {
    bool ready;
    {
      const py::gil_scoped_release release;
      ready = result.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready;
    }
    if (ready) break;
    if (PyErr_CheckSignals() != 0) stop();
    if (!callback.is_none()) {
      try {
        report();
      } catch (py::error_already_set& e) {
        e.restore();
        stop();
      }
    }
  }
  if (!callback.is_none()) report();
  return result.get();  // the work's own errors (InputError: ValueError)
}

// ---- a checkpoint's transformer ----

// Torch's and OpenBLAS's pools serial for one call (extract's arithmetic: each group of prompts
// on one thread), the caller's settings given back after.
class SerialKernels {
 public:
  SerialKernels() : torch_(torch::get_num_threads()), blas_(openblas_get_num_threads()) {
    torch::set_num_threads(1);
    openblas_set_num_threads(1);
  }
  ~SerialKernels() {
    torch::set_num_threads(torch_);
    openblas_set_num_threads(blas_);
  }
  SerialKernels(const SerialKernels&) = delete;
  SerialKernels& operator=(const SerialKernels&) = delete;

 private:
  int torch_, blas_;
};

// A float array of `rank` dimensions, as C-ordered float64 (a copy only when it is not one).
// float32 and float64 are accepted; anything else is refused naming the argument.
template <class T>
py::array_t<T, py::array::c_style> FloatArray(const py::array& a, const std::string& name, int rank,
                                              const std::string& shape) {
  const char kind = a.dtype().kind();
  if (kind != 'f' || (a.itemsize() != 4 && a.itemsize() != 8))
    throw InputError("iclprobe", name,
                     "expected a float32 or float64 array of shape " + shape + ", got dtype " +
                         std::string(py::str(a.dtype())));
  if (a.ndim() != rank)
    throw InputError("iclprobe", name,
                     "expected " + std::to_string(rank) + " dimensions " + shape + ", got " +
                         std::to_string(a.ndim()));
  auto out = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!out) throw InputError("iclprobe", name, "could not be read as " + shape);
  const T* p = out.data();
  for (py::ssize_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(double(p[i])))
      throw InputError("iclprobe", name,
                       "holds a value that is not finite at flat index " + std::to_string(i));
  return out;
}

// The entries of a list argument whose items may be comma lists themselves ("gd:0.05:3,newton:3"
// or ["gd:0.05:3", "newton:3"]): the CLI's one list splitter (core::SplitList), so an empty entry
// ("", "ols,") is refused naming the argument rather than skipped.
std::vector<std::string> ListArgument(const std::string& name,
                                      const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items)
    for (std::string& e : icl::core::SplitList("iclprobe", name, item))
      out.push_back(std::move(e));
  return out;
}

std::string Shape(const std::vector<py::ssize_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// ---- targets ----

// Regression targets after k = 1..n examples of each prompt: x [N, n, d], y [N, n].
py::dict Targets(const py::array& x_in, const py::array& y_in, double ridge_lambda,
                 const std::vector<std::string>& learners, double noise, double w_scale) {
  const auto x = FloatArray<double>(x_in, "x", 3, "[N, n, d]");
  const auto y = FloatArray<double>(y_in, "y", 2, "[N, n]");
  const py::ssize_t N = x.shape(0), n = x.shape(1), d = x.shape(2);
  if (y.shape(0) != N || y.shape(1) != n)
    throw InputError("iclprobe", "y",
                     "expected shape [" + std::to_string(N) + ", " + std::to_string(n) +
                         "] to match x " + Shape({N, n, d}) + ", got " +
                         Shape({y.shape(0), y.shape(1)}));
  if (N < 1 || n < 1 || d < 1) throw InputError("iclprobe", "x", "has an empty dimension");
  if (!(ridge_lambda >= 0) || !std::isfinite(ridge_lambda))
    throw InputError("iclprobe", "ridge_lambda", "must be a finite number >= 0");
  icl::data::PromptSet set;
  set.task.d = int(d), set.task.n = int(n), set.task.noise = noise, set.task.w_scale = w_scale;
  set.task.Validate();
  // Row-major [N, n, d] is the column-major d x n x N cube; [N, n] is n x N.
  set.x = arma::cube(x.data(), d, n, N);
  set.y = arma::mat(y.data(), n, N);
  set.w.zeros(d, N);
  icl::data::TargetSet t;
  std::map<std::string, arma::cube> iterates;
  try {  // extract's checks of its learner targets, reported under this function's argument
    const std::vector<std::string> specs = icl::extract::CanonicalLearnerSpecs(
        ListArgument("learners", learners), set.task, "learners");
    py::gil_scoped_release release;
    t = icl::data::ComputeTargets(set, ridge_lambda);
    for (const auto& spec : specs)
      iterates[spec] = icl::extract::LearnerWeights(set, spec);
  } catch (const InputError& e) {
    if (e.field() != "learner_targets") throw;
    throw InputError("iclprobe", "learners", e.text());
  }
  auto out3 = [&](const arma::cube& c) {
    py::array_t<double> a({N, n, d});
    std::memcpy(a.mutable_data(), c.memptr(), sizeof(double) * c.n_elem);
    return a;
  };
  py::dict r;
  r["w_ols"] = out3(t.w_ols);
  r["w_ridge"] = out3(t.w_ridge);
  r["xty"] = out3(t.xty);
  py::array_t<double> xtx({N, n, d, d});
  std::memcpy(xtx.mutable_data(), t.xtx.memptr(), sizeof(double) * t.xtx.n_elem);
  r["xtx"] = xtx;
  for (const auto& [spec, c] : iterates)
    r[py::str(spec)] = out3(c);
  return r;
}

// ---- probes on arrays ----

// What a Python call asks of a probing run, with the CLI's option names (probe --help).
struct ProbeSettings {
  std::vector<std::string> probes = {"ridge"};  // families: ridge, linear, mlp
  std::string positions = "y";                  // the T axis: y (state after k = 1..K) or all
  std::string at = "state";                     // state, query or both (query: positions all)
  std::string pooling = "attention";            // linear/mlp input: attention or position
  std::optional<std::vector<double>> lambdas;   // none: the CLI's grid
  std::array<double, 3> split = {0.8, 0.1, 0.1};
  std::uint64_t seed = 0;
  int seeds = 1, bootstrap = 1000, threads = 1;
  bool shuffle_control = false, codelength = false;
  std::optional<std::vector<double>> codelength_blocks;
  int mlp_hidden = 256, epochs = 30, patience = 4, batch = 64;
  double lr = 1e-3;
  std::string name = "hidden";  // names the main source in messages and family reports
};

struct ProbeArrays {
  py::array hidden;                                         // [N, L, T, F]
  std::map<std::string, py::array> targets;                 // name -> [N, K, D]
  std::vector<std::pair<std::string, py::array>> controls;  // name -> [N, L, T, F]
  std::vector<int> layers, ks;                              // labels of the L and K axes
};

// The request the CLI's probe would build from `s` (its option names in messages).
icl::probes::ProbeRequest RequestOf(const ProbeSettings& s) {
  namespace pr = icl::probes;
  pr::ProbeRequest r;
  r.families.clear();
  for (const auto& f : ListArgument("probes", s.probes)) {
    if (f == "ridge")
      r.families.push_back(pr::Family::kRidge);
    else if (f == "linear")
      r.families.push_back(pr::Family::kLinear);
    else if (f == "mlp")
      r.families.push_back(pr::Family::kMlp);
    else
      throw InputError("iclprobe", "probes",
                       "expected ridge, linear or mlp, got '" + f.substr(0, 40) + "'");
  }
  if (r.families.empty()) throw InputError("iclprobe", "probes", "name at least one family");
  r.pooled = pr::ParsePooling(s.pooling);
  r.at = pr::ParseProbeAt(s.at);
  if (s.lambdas) r.lambdas = arma::vec(*s.lambdas);
  r.split = s.split;
  r.seed = s.seed;
  r.seeds = s.seeds;
  r.bootstrap = s.bootstrap;
  r.shuffle_control = s.shuffle_control;
  r.codelength = s.codelength;
  if (s.codelength_blocks) {
    if (!s.codelength)
      throw InputError("iclprobe", "codelength_blocks", "only with codelength=True");
    r.codelength_fractions = *s.codelength_blocks;
  }
  r.gradient.mlp_hidden = s.mlp_hidden;
  r.gradient.lr = s.lr;
  r.gradient.max_epochs = s.epochs;
  r.gradient.patience = s.patience;
  r.gradient.batch = s.batch;
  if (s.threads < 1) throw InputError("iclprobe", "threads", "must be at least 1");
  return r;
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

py::array_t<double> ToNumpy(const arma::mat& m) {  // p x q column-major -> [q, p] row-major
  py::array_t<double> a({py::ssize_t(m.n_cols), py::ssize_t(m.n_rows)});
  std::memcpy(a.mutable_data(), m.memptr(), sizeof(double) * m.n_elem);
  return a;
}
py::array_t<double> ToNumpy(const arma::vec& v) {
  py::array_t<double> a(py::ssize_t(v.n_elem));
  std::memcpy(a.mutable_data(), v.memptr(), sizeof(double) * v.n_elem);
  return a;
}

// A probes file's contents, from a file (ReadProbesFile) or from a run in memory
// (ProbeResultsInMemory): the same object, so every analysis reads both alike.
class Probes {
 public:
  explicit Probes(icl::probes::ProbeResults r) : r_(std::move(r)) {}
  const icl::probes::ProbeResults& results() const { return r_; }
  // /metrics/<target>/<probe>/<source>/<metric> as [L, K, S] (cube (seed, k, layer) column-major
  // is that row-major).
  py::array_t<double> Metric(const std::string& target, const std::string& probe,
                             const std::string& source, const std::string& metric) const {
    const arma::cube* c = r_.Find(target, probe, source, metric);
    if (!c)
      throw InputError("'" + r_.path + "'", "",
                       "has no metric " + target + "/" + probe + "/" + source + "/" + metric);
    py::array_t<double> a(
        {py::ssize_t(c->n_slices), py::ssize_t(c->n_cols), py::ssize_t(c->n_rows)});
    std::memcpy(a.mutable_data(), c->memptr(), sizeof(double) * c->n_elem);
    return a;
  }
  // The onset of every (target, probe) at k under `rule` (analysis::FindOnsets, what `iclprobe
  // report` prints).
  py::list Onsets(int k, double threshold, double relative, double margin) const {
    const icl::analysis::OnsetRule rule = Rule(threshold, relative, margin);
    if (std::find(r_.ks.begin(), r_.ks.end(), k) == r_.ks.end())
      throw InputError("'" + r_.path + "'", "k", "k=" + std::to_string(k) + " was not probed");
    return OnsetList(icl::analysis::FindOnsets(r_, k, rule));
  }
  py::dict Ridge(const std::string& target, int layer, int k, int seed,
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

  static icl::analysis::OnsetRule Rule(double threshold, double relative, double margin) {
    icl::analysis::OnsetRule rule;
    rule.threshold = threshold, rule.relative = relative, rule.margin = margin;
    rule.Validate();
    return rule;
  }
  static py::list OnsetList(const std::vector<icl::analysis::Onset>& onsets) {
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

 private:
  icl::probes::ProbeResults r_;
};

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

// One probing run on arrays: the runner's output and what describes it, so that its results
// can be tabled, analysed as a probes file's (in memory) and saved as one.
class ProbeRun {
 public:
  ProbeRun(icl::probes::ProbeRequest request, icl::extract::ActivationsInfo info,
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
  icl::extract::ActivationsInfo info_;
  icl::probes::ProbeOutput out_;
  std::unique_ptr<Probes> results_;
};

// The runner's k counts 1..K along the caller's K axis; results carry the caller's labels.
void RelabelKs(icl::probes::ProbeOutput& out, const std::vector<int>& labels) {
  const auto label = [&](int k) { return labels[std::size_t(k - 1)]; };
  for (auto& r : out.records)
    r.k = label(r.k);
  for (auto& r : out.ridge)
    r.k = label(r.k);
  for (auto& a : out.alphas)
    a.k = label(a.k);
  for (auto& c : out.codes)
    c.k = label(c.k);
  for (auto& k : out.ks)
    k = label(k);
}

std::unique_ptr<ProbeRun> Probe(const ProbeArrays& in, const ProbeSettings& s,
                                const py::object& progress) {
  namespace pr = icl::probes;
  pr::ProbeRequest r = RequestOf(s);
  const auto h = FloatArray<float>(in.hidden, "hidden", 4, "[N, L, T, F]");
  const py::ssize_t N = h.shape(0), L = h.shape(1), T = h.shape(2), F = h.shape(3);
  if (N < 1 || L < 1 || T < 1 || F < 1)
    throw InputError("iclprobe", "hidden", "has an empty dimension: " + Shape({N, L, T, F}));
  if (s.positions != "y" && s.positions != "all")
    throw InputError("iclprobe", "positions",
                     "expected y or all, got '" + s.positions.substr(0, 40) + "'");
  const bool all = s.positions == "all";
  if (all && T % 2 != 0)
    throw InputError("iclprobe", "hidden",
                     "positions all: expected 2n tokens (x_1 y_1 ... x_n y_n) on the T axis, got " +
                         std::to_string(T));
  const py::ssize_t K = all ? T / 2 : T;
  if (py::ssize_t(in.layers.size()) != L || py::ssize_t(in.ks.size()) != K)
    throw std::logic_error("iclprobe: layer and k labels do not match the hidden states");
  for (int l : in.layers)
    if (l < 0 || l > icl::learners::kMaxLayers)
      throw InputError("iclprobe", "layers",
                       "labels must be in 0.." + std::to_string(icl::learners::kMaxLayers) +
                           ", got " + std::to_string(l));
  for (std::size_t i = 0; i < in.ks.size(); ++i)
    if (in.ks[i] < 1 || in.ks[i] > icl::data::kMaxN || (all && in.ks[i] != int(i) + 1))
      throw InputError("iclprobe", "ks",
                       all ? "with positions all the k axis is 1..n"
                           : "labels must be in 1.." + std::to_string(icl::data::kMaxN));
  if (in.targets.empty()) throw InputError("iclprobe", "targets", "at least one is needed");

  auto model = HiddenSource(h, in.layers);
  icl::extract::ActivationsInfo info;
  info.path = s.name;
  info.model.hidden = int(F);
  info.model.layers = int(L) - 1;
  info.task.n = int(K);
  info.prompts = N;
  info.layers = in.layers;
  info.positions = all ? icl::extract::Positions::kAll : icl::extract::Positions::kY;
  info.positions_per_prompt = int(T);
  info.ridge_lambda = -1;
  r.activations = s.name;
  r.targets.clear();
  for (const auto& [name, arr] : in.targets) {
    const std::string arg = "targets['" + name.substr(0, 40) + "']";
    if (!icl::core::IsPlainName(name))
      throw InputError("iclprobe", "targets",
                       "'" + name.substr(0, 40) + "' is not a plain name (letters, digits, _ . -)");
    const auto t = FloatArray<double>(arr, arg, 3, "[N, K, D]");
    if (t.shape(0) != N || t.shape(1) != K)
      throw InputError("iclprobe", arg,
                       "expected [" + std::to_string(N) + ", " + std::to_string(K) +
                           ", D] to match hidden " + Shape({N, L, T, F}) + ", got " +
                           Shape({t.shape(0), t.shape(1), t.shape(2)}));
    const py::ssize_t D = t.shape(2);
    if (D < 1) throw InputError("iclprobe", arg, "has no entries (D = 0)");
    pr::Target target{name, arma::uword(D), {}};
    for (py::ssize_t k = 0; k < K; ++k) {
      arma::mat v(D, N);
      for (py::ssize_t i = 0; i < N; ++i)
        for (py::ssize_t j = 0; j < D; ++j)
          v(j, i) = t.at(i, k, j);
      target.values.push_back(std::move(v));
    }
    model->targets[name] = std::move(target);
    r.targets.push_back(name);
    info.targets.push_back(name);
    info.target_per_k.push_back(true);
  }
  info.task.d = int(model->targets.begin()->second.dims);
  std::vector<icl::extract::ActivationsInfo> infos = {info};
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
    icl::extract::ActivationsInfo ci = info;
    ci.path = name;
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
  RelabelKs(out, in.ks);
  // What describes the results: the caller's k labels on the task's k axis.
  for (int& k : r.ks)
    k = in.ks[std::size_t(k - 1)];
  info.task.n = std::max(info.task.n, *std::max_element(in.ks.begin(), in.ks.end()));
  info.model.layers =
      std::max(info.model.layers, *std::max_element(in.layers.begin(), in.layers.end()));
  auto run = std::make_unique<ProbeRun>(std::move(r), std::move(info), std::move(out));
  run->threads = workers;
  return run;
}

// ---- an activations file ----

// An activations file opened through extract's one reader (its hostile-file checks included).
class Activations {
 public:
  explicit Activations(const std::string& path) : info_(icl::extract::ReadActivationsInfo(path)) {}
  const icl::extract::ActivationsInfo& info() const { return info_; }
  // /hidden/layer_LL as [N, T, H] float32 (T: the stored positions).
  py::array_t<float> Hidden(int layer) const {
    if (std::find(info_.layers.begin(), info_.layers.end(), layer) == info_.layers.end())
      throw InputError("'" + info_.path + "'", "layer",
                       "layer " + std::to_string(layer) + " is not stored");
    const icl::extract::HiddenReader reader(info_, layer);
    arma::fmat m;
    {
      py::gil_scoped_release release;
      m = reader.Read(0, info_.prompts);
    }
    py::array_t<float> a({py::ssize_t(info_.prompts), py::ssize_t(reader.positions()),
                          py::ssize_t(reader.hidden())});
    std::memcpy(a.mutable_data(), m.memptr(), sizeof(float) * m.n_elem);
    return a;
  }
  // /targets/<name> as [N, n, entries] (per k) or [N, entries]; X'X as [N, n, d, d].
  py::array_t<double> Target(const std::string& name) const {
    const icl::extract::StoredTarget t = icl::extract::ReadTarget(info_, name);
    std::vector<py::ssize_t> shape = {py::ssize_t(info_.prompts)};
    if (t.per_k) shape.push_back(info_.task.n);
    if (t.symmetric) {
      shape.push_back(py::ssize_t(t.side));
      shape.push_back(py::ssize_t(t.side));
    } else {
      shape.push_back(py::ssize_t(t.entries));
    }
    py::array_t<double> a(shape);
    std::memcpy(a.mutable_data(), t.values.data(), sizeof(double) * t.values.size());
    return a;
  }
  py::dict Prompts() const {
    const icl::data::PromptSet set = icl::extract::ReadActivationPrompts(info_, info_.prompts);
    const py::ssize_t N = py::ssize_t(set.size()), n = set.task.n, d = set.task.d;
    py::array_t<double> x({N, n, d}), y({N, n}), w({N, d});
    std::memcpy(x.mutable_data(), set.x.memptr(), sizeof(double) * set.x.n_elem);
    std::memcpy(y.mutable_data(), set.y.memptr(), sizeof(double) * set.y.n_elem);
    std::memcpy(w.mutable_data(), set.w.memptr(), sizeof(double) * set.w.n_elem);
    py::dict r;
    r["x"] = x, r["y"] = y, r["w"] = w;
    return r;
  }

 private:
  icl::extract::ActivationsInfo info_;
};

// A checkpoint's transformer (LoadCheckpoint's checks), run as extract runs it: groups of
// kComputeGroup prompts padded and run whole on one thread each, so that its states equal an
// activations file's bit for bit.
class TransformerModel {
 public:
  explicit TransformerModel(const std::string& path)
      : model_(icl::learners::LoadCheckpoint(path, &info_)) {
    model_->eval();
  }
  const icl::learners::CheckpointInfo& info() const { return info_; }

  // x [N, n, d], y [N, n] -> (predictions [N, n] float32, states [N, L + 1, 2n, H] float32 or
  // None).
  py::tuple Forward(const py::array& x_in, const py::array& y_in, bool return_hidden, int threads,
                    const py::object& progress) {
    const auto x = FloatArray<double>(x_in, "x", 3, "[N, n, d]");
    const auto y = FloatArray<double>(y_in, "y", 2, "[N, n]");
    const icl::learners::ModelConfig& mc = info_.model;
    const py::ssize_t N = x.shape(0), n = x.shape(1), d = x.shape(2);
    if (d != mc.d || n < 1 || n > mc.n_max || N < 1)
      throw InputError("iclprobe", "x",
                       "expected [N, n, " + std::to_string(mc.d) +
                           "] with 1 <= n <= " + std::to_string(mc.n_max) + " for checkpoint '" +
                           info_.path + "', got " + Shape({N, n, d}));
    if (y.shape(0) != N || y.shape(1) != n)
      throw InputError(
          "iclprobe", "y",
          "expected " + Shape({N, n}) + " to match x, got " + Shape({y.shape(0), y.shape(1)}));
    if (threads < 1) throw InputError("iclprobe", "threads", "must be at least 1");
    // The model runs in float32: a larger input would become infinite in its tokens.
    for (const auto& [arr, name] : {std::pair{&x, "x"}, std::pair{&y, "y"}})
      for (py::ssize_t i = 0; i < arr->size(); ++i)
        if (std::abs(arr->data()[i]) > std::numeric_limits<float>::max())
          throw InputError("iclprobe", name,
                           "holds a value beyond float32's range (the model's precision) at "
                           "flat index " +
                               std::to_string(i));
    icl::data::PromptSet set;
    set.task.d = int(d), set.task.n = int(n);
    set.x = arma::cube(x.data(), d, n, N);
    set.y = arma::mat(y.data(), n, N);
    set.w.zeros(d, N);
    const py::ssize_t S = mc.layers + 1, T = 2 * n, H = mc.hidden;
    py::array_t<float> predictions({N, n});
    py::array_t<float> hidden(return_hidden ? std::vector<py::ssize_t>{N, S, T, H}
                                            : std::vector<py::ssize_t>{0});
    float* pred = predictions.mutable_data();
    float* hid = hidden.mutable_data();
    Interruptible<bool>(progress, [&](const Tick& tick) {
      const SerialKernels serial;
      const std::int64_t G = icl::extract::kComputeGroup, groups = (N + G - 1) / G;
      icl::core::ThreadPool pool(icl::core::WorkerCount(threads, groups));
      std::atomic<std::int64_t> finished{0};
      pool.For(groups, [&](std::int64_t j) {
        const std::int64_t g0 = j * G, g = std::min<std::int64_t>(G, N - g0);
        tick(double(std::min(finished * G, std::int64_t(N))), double(N));  // stops when cancelled
        const auto r = icl::extract::RunGroup(model_, set, g0, g);
        const torch::Tensor p = r.predictions.contiguous();
        std::memcpy(pred + g0 * n, p.data_ptr<float>(), sizeof(float) * g * n);
        for (py::ssize_t l = 0; return_hidden && l < S; ++l) {
          const torch::Tensor h = r.hidden[l].contiguous();
          for (std::int64_t i = 0; i < g; ++i)
            std::memcpy(hid + ((g0 + i) * S + l) * T * H, h.data_ptr<float>() + i * T * H,
                        sizeof(float) * T * H);
        }
        tick(double(std::min(++finished * G, std::int64_t(N))), double(N));
      });
      return true;
    });
    // Inputs in float32's range can still overflow inside the model (products of large states).
    for (py::ssize_t i = 0; i < N * n; ++i)
      if (!std::isfinite(pred[i]))
        throw InputError("iclprobe", "x",
                         "the model's predictions of prompt " + std::to_string(i / n) +
                             " are not finite: its values overflow float32 inside the model");
    return py::make_tuple(predictions, return_hidden ? py::object(hidden) : py::object(py::none()));
  }

 private:
  icl::learners::CheckpointInfo info_;
  icl::learners::Transformer model_{nullptr};
};

// ---- extract: a checkpoint's states to an activations file ----

struct ExtractSettings {
  std::int64_t prompts = 2000;
  std::uint64_t seed = 7;
  std::optional<std::vector<int>> layers;  // none: every state
  std::string positions = "all";
  double ridge_lambda = 0.1;
  std::vector<std::string> learner_targets;
  std::optional<int> n;  // task overrides, as extract's --n, --noise, --w-scale
  std::optional<double> noise, w_scale;
  bool float16 = false, compress = false, force = false, resume = false;
  int batch = 256, threads = 1;
};

// `iclprobe extract` with its options: the same ExtractConfig, checks and Extract stage (the
// partial file, the content digest, the rename). Returns the path written: the file, or
// <out>.partial when stopped (Ctrl-C at a batch), which resume=True continues.
std::string ExtractFile(const std::string& checkpoint, const std::string& out,
                        const ExtractSettings& s, const py::object& progress) {
  namespace ex = icl::extract;
  ex::ExtractConfig cfg;
  cfg.checkpoint = checkpoint;
  cfg.out = out;
  cfg.prompts = s.prompts;
  cfg.seed = s.seed;
  if (s.layers) cfg.layers = *s.layers;
  if (s.positions != "all" && s.positions != "y")
    throw InputError("iclprobe", "positions",
                     "expected all or y, got '" + s.positions.substr(0, 40) + "'");
  cfg.positions = s.positions == "all" ? ex::Positions::kAll : ex::Positions::kY;
  cfg.ridge_lambda = s.ridge_lambda;
  cfg.float16 = s.float16;
  cfg.compress = s.compress;
  cfg.batch = s.batch;
  if (s.threads < 1) throw InputError("iclprobe", "threads", "must be at least 1");
  const icl::learners::CheckpointInfo info = icl::learners::ReadCheckpointInfo(checkpoint);
  cfg.task = info.train.task;
  if (s.n) cfg.task.n = *s.n;
  if (s.noise) cfg.task.noise = *s.noise;
  if (s.w_scale) cfg.task.w_scale = *s.w_scale;
  if (!s.learner_targets.empty())
    cfg.learner_targets =
        ex::CanonicalLearnerSpecs(ListArgument("learner_targets", s.learner_targets), cfg.task);
  cfg.Validate(info.model);
  ex::ExtractOptions eo;
  eo.force = s.force;
  eo.resume = s.resume;
  const ex::ExtractResult r = Interruptible<ex::ExtractResult>(progress, [&](const Tick& tick) {
    const SerialKernels serial;  // each prompt group on one thread, as the CLI runs it
    icl::core::ThreadPool pool(icl::core::WorkerCount(s.threads));
    return ex::Extract(cfg, eo, pool, [&](const ex::ExtractProgress& p) {
      tick(double(p.done), double(p.total));
    });
  });
  return r.written;
}

// ---- the files of intervene, das, swap, erase and trace ----

// A results file of the causal tests or of trace, checked by its format's own reader (what
// `iclprobe report` and the CSV writers read), then read dataset by dataset from a handle opened
// before the check.
class ResultsFile {
 public:
  explicit ResultsFile(const std::string& path)
      : file_(icl::h5::File::Open(path)), kind_(FileKind(path)) {
    std::ostringstream csv;
    namespace iv = icl::intervene;
    if (kind_ == "interventions")
      iv::WriteInterventionsCsv(csv, iv::ReadInterventionsFile(path));
    else if (kind_ == "das")
      iv::WriteDasCsv(csv, iv::ReadDasFile(path));
    else if (kind_ == "swaps")
      iv::WriteSwapsCsv(csv, iv::ReadSwapsFile(path));
    else if (kind_ == "erasure")
      iv::WriteErasureCsv(csv, iv::ReadErasureFile(path));
    else if (kind_ == "trace")
      icl::analysis::WriteTraceCsv(csv, icl::analysis::ReadTraceFile(path));
    else
      throw InputError("'" + path + "'", "",
                       "has format '" + kind_.substr(0, 40) +
                           "', not a file of intervene, das, swap, erase or trace");
    csv_ = csv.str();
  }
  const std::string& kind() const { return kind_; }
  const std::string& path() const { return file_.file(); }
  const std::string& csv() const { return csv_; }
  // Root attributes: strings (JSON objects parsed by the caller), numbers, lists.
  py::dict Attrs() const {
    py::dict out;
    for (const auto& name : file_.AttrNames()) {
      py::object v = py::none();
      // The attribute's shape and type decide which getter succeeds: a list stays a list,
      // even of one entry.
      const bool list = file_.IsListAttr(name);
      if (list && (TryGet(v, [&] { return py::cast(file_.GetStringList(name)); }) ||
                   TryGet(v, [&] { return py::cast(file_.GetIntList(name)); }))) {
        out[py::str(name)] = v;
        continue;
      }
      if (TryGet(v, [&] { return py::cast(file_.GetString(name)); }) ||
          TryGet(v, [&] { return py::cast(file_.GetStringList(name)); }) ||
          TryGet(v, [&] { return py::cast(file_.GetInt(name)); }) ||
          TryGet(v, [&] { return py::cast(file_.GetIntList(name)); }) ||
          TryGet(v, [&] { return py::cast(file_.GetDouble(name)); }))
        out[py::str(name)] = v;
    }
    return out;
  }
  // Every dataset's path, depth first.
  std::vector<std::string> Datasets() const {
    std::vector<std::string> out;
    Walk(file_, "", out);
    return out;
  }
  // One dataset as float64 in its shape, and its axis labels.
  py::tuple Read(const std::string& name) const {
    const std::vector<std::string> all = Datasets();
    if (std::find(all.begin(), all.end(), name) == all.end())
      throw InputError("'" + path() + "'", "name",
                       "has no dataset '" + name.substr(0, 80) + "'; datasets() lists them");
    const icl::h5::Dataset ds = file_.OpenDataset(name);
    const auto dims = ds.dims();
    std::vector<py::ssize_t> shape(dims.begin(), dims.end());
    py::array_t<double> a(shape);
    ds.Read(a.mutable_data(), std::size_t(a.size()));
    return py::make_tuple(a, ds.DimLabels());
  }

 private:
  template <class F>
  static bool TryGet(py::object& v, F get) {
    try {
      v = get();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  static void Walk(const icl::h5::Group& g, const std::string& prefix,
                   std::vector<std::string>& out) {
    for (const auto& m : g.Members()) {
      const std::string path = prefix.empty() ? m : prefix + "/" + m;
      std::optional<icl::h5::Group> sub;
      try {
        sub.emplace(g.OpenGroup(m));
      } catch (const std::exception&) {
        out.push_back(path);  // not a group: a dataset
        continue;
      }
      Walk(*sub, path, out);
    }
  }
  icl::h5::File file_;
  std::string kind_;
  std::string csv_;
};

}  // namespace

// What an iclprobe file is, by its root attribute `format`, in the formats' owners' terms:
// "activations", "probes", or the attribute as found ("" when it has none).
std::string FileKind(const std::string& path) {
  const icl::h5::File f = icl::h5::File::Open(path);
  const std::string format = f.HasAttr("format") ? f.GetString("format") : std::string();
  if (format == icl::extract::schema::kFormat) return "activations";
  if (format == icl::probes::kProbesFormat) return "probes";
  if (format == icl::learners::kCheckpointFormat) return "checkpoint";
  if (format == icl::intervene::kInterventionsFormat) return "interventions";
  if (format == icl::intervene::kDasFormat) return "das";
  if (format == icl::intervene::kSwapsFormat) return "swaps";
  if (format == icl::intervene::kErasureFormat) return "erasure";
  if (format == icl::analysis::kTraceFormat) return "trace";
  return format;
}

namespace {

// The process: file kinds, thread counts, versions and the BLAS kernels in use.
void BindProcess(py::module_& m) {
  m.def("file_kind", &FileKind, py::arg("path"));
  m.def(
      "thread_count",
      [](std::int64_t threads) {
        if (threads < 1) throw InputError("iclprobe", "threads", "must be at least 1");
        return icl::core::WorkerCount(threads);
      },
      py::arg("threads"));
  m.doc() = "iclprobe's C++ core (use the iclprobe package, which documents every function)";
  m.attr("__version__") = icl::kVersion;
  m.attr("git_commit") = icl::kGitCommit;
  // "1.13" for LibTorch 1.13.x: what a torch in the same process must be.
  m.attr("torch_version") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  m.def("blas_core", &icl::core::BlasCoreName,
        "The kernels OpenBLAS runs in this process (OPENBLAS_CORETYPE decides at load time).");
  m.def("blas_core_advice", [] {
    const std::string name = icl::core::BlasCoreName(), want = icl::core::BlasCoreOverride();
    return icl::core::IsGenericBlasCore(name) && !want.empty() ? want : std::string();
  });
}

// Regression targets of prompts given as arrays.
void BindTargets(py::module_& m) {
  m.def("targets", &Targets, py::arg("x"), py::arg("y"), py::arg("ridge_lambda"),
        py::arg("learners"), py::arg("noise"), py::arg("w_scale"));
}

// Probing runs on arrays, their settings, and probes files (read, or a run's in memory).
void BindProbes(py::module_& m) {
  py::class_<ProbeArrays>(m, "ProbeArrays")
      .def(py::init<>())
      .def_readwrite("hidden", &ProbeArrays::hidden)
      .def_readwrite("targets", &ProbeArrays::targets)
      .def_readwrite("controls", &ProbeArrays::controls)
      .def_readwrite("layers", &ProbeArrays::layers)
      .def_readwrite("ks", &ProbeArrays::ks);
  py::class_<ProbeSettings>(m, "ProbeSettings")
      .def(py::init<>())
      .def_readwrite("probes", &ProbeSettings::probes)
      .def_readwrite("positions", &ProbeSettings::positions)
      .def_readwrite("at", &ProbeSettings::at)
      .def_readwrite("pooling", &ProbeSettings::pooling)
      .def_readwrite("lambdas", &ProbeSettings::lambdas)
      .def_readwrite("split", &ProbeSettings::split)
      .def_readwrite("seed", &ProbeSettings::seed)
      .def_readwrite("seeds", &ProbeSettings::seeds)
      .def_readwrite("bootstrap", &ProbeSettings::bootstrap)
      .def_readwrite("threads", &ProbeSettings::threads)
      .def_readwrite("shuffle_control", &ProbeSettings::shuffle_control)
      .def_readwrite("codelength", &ProbeSettings::codelength)
      .def_readwrite("codelength_blocks", &ProbeSettings::codelength_blocks)
      .def_readwrite("mlp_hidden", &ProbeSettings::mlp_hidden)
      .def_readwrite("epochs", &ProbeSettings::epochs)
      .def_readwrite("patience", &ProbeSettings::patience)
      .def_readwrite("batch", &ProbeSettings::batch)
      .def_readwrite("lr", &ProbeSettings::lr)
      .def_readwrite("name", &ProbeSettings::name);

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

// An activations file, read through extract's reader.
void BindActivations(py::module_& m) {
  py::class_<Activations>(m, "Activations")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const Activations& a) { return a.info().path; })
      .def_property_readonly("prompts", [](const Activations& a) { return a.info().prompts; })
      .def_property_readonly("layers", [](const Activations& a) { return a.info().layers; })
      .def_property_readonly("targets", [](const Activations& a) { return a.info().targets; })
      .def_property_readonly("positions",
                             [](const Activations& a) {
                               return a.info().positions == icl::extract::Positions::kAll ? "all"
                                                                                          : "y";
                             })
      .def_property_readonly("model_config",
                             [](const Activations& a) { return a.info().model.ToJson(); })
      .def_property_readonly("task_config",
                             [](const Activations& a) { return a.info().task.ToJson(); })
      .def_property_readonly("seed", [](const Activations& a) { return a.info().seed; })
      .def_property_readonly("checkpoint_sha256",
                             [](const Activations& a) { return a.info().checkpoint_sha256; })
      .def("hidden", &Activations::Hidden, py::arg("layer"))
      .def("target", &Activations::Target, py::arg("name"))
      .def("read_prompts", &Activations::Prompts);
}

// extract: a checkpoint's states to an activations file.
void BindExtract(py::module_& m) {
  py::class_<ExtractSettings>(m, "ExtractSettings")
      .def(py::init<>())
      .def_readwrite("prompts", &ExtractSettings::prompts)
      .def_readwrite("seed", &ExtractSettings::seed)
      .def_readwrite("layers", &ExtractSettings::layers)
      .def_readwrite("positions", &ExtractSettings::positions)
      .def_readwrite("ridge_lambda", &ExtractSettings::ridge_lambda)
      .def_readwrite("learner_targets", &ExtractSettings::learner_targets)
      .def_readwrite("n", &ExtractSettings::n)
      .def_readwrite("noise", &ExtractSettings::noise)
      .def_readwrite("w_scale", &ExtractSettings::w_scale)
      .def_readwrite("float16", &ExtractSettings::float16)
      .def_readwrite("compress", &ExtractSettings::compress)
      .def_readwrite("force", &ExtractSettings::force)
      .def_readwrite("resume", &ExtractSettings::resume)
      .def_readwrite("batch", &ExtractSettings::batch)
      .def_readwrite("threads", &ExtractSettings::threads);
  m.def("extract", &ExtractFile, py::arg("checkpoint"), py::arg("out"), py::arg("settings"),
        py::arg("progress"));
}

// The results files of intervene, das, swap, erase and trace.
void BindResultsFiles(py::module_& m) {
  py::class_<ResultsFile>(m, "ResultsFile")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("kind", &ResultsFile::kind)
      .def_property_readonly("path", &ResultsFile::path)
      .def("csv", &ResultsFile::csv)
      .def("attrs", &ResultsFile::Attrs)
      .def("datasets", &ResultsFile::Datasets)
      .def("read", &ResultsFile::Read, py::arg("name"));
}

// A checkpoint's transformer, run as extract runs it.
void BindTransformer(py::module_& m) {
  py::class_<TransformerModel>(m, "Transformer")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const TransformerModel& t) { return t.info().path; })
      .def_property_readonly("model_config",
                             [](const TransformerModel& t) { return t.info().model.ToJson(); })
      .def_property_readonly("train_config",
                             [](const TransformerModel& t) { return t.info().train.ToJson(); })
      .def_property_readonly("step", [](const TransformerModel& t) { return t.info().step; })
      .def("forward", &TransformerModel::Forward, py::arg("x"), py::arg("y"),
           py::arg("return_hidden"), py::arg("threads"), py::arg("progress"));
}

}  // namespace

// The order of the bindings is the order of registration: a signature names a class bound
// before it.
PYBIND11_MODULE(_core, m) {
  BindProcess(m);
  BindTargets(m);
  BindProbes(m);
  BindActivations(m);
  BindExtract(m);
  BindResultsFiles(m);
  BindTransformer(m);
}
