// The Python module's extract: a checkpoint's states to an activations file, through the same
// ExtractConfig, checks and Extract stage as `iclprobe extract`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/thread_pool.hpp"
#include "extract/extract.hpp"
#include "learners/checkpoint.hpp"
#include "python/arrays.hpp"
#include "python/bindings.hpp"
#include "python/long_call.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

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
  cfg.positions = ex::ParsePositions(s.positions);
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

}  // namespace

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

}  // namespace icl::python
