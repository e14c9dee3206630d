// The Python extension `iclprobe._core`: numpy arrays in, numpy arrays out, over the libraries
// the CLI calls (the same ridge probes, bootstrap, targets and file readers; no second
// implementation). iclprobe/__init__.py is the documented face; the bind_*.cpp files convert and
// check, one area each (bindings.hpp), and this file binds the process and registers the areas.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/version.h>

#include <cstdint>
#include <string>

#include "analysis/trace_file.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/process.hpp"
#include "core/thread_pool.hpp"
#include "core/version.hpp"
#include "extract/activations_schema.hpp"
#include "formats/header.hpp"
#include "intervene/das.hpp"
#include "intervene/erase.hpp"
#include "intervene/intervene.hpp"
#include "intervene/swap.hpp"
#include "learners/checkpoint.hpp"
#include "probes/probes_file.hpp"
#include "python/bindings.hpp"

namespace icl::python {

using icl::core::InputError;

std::string FileKind(const std::string& path) {
  const icl::h5::File f = icl::h5::File::Open(path);
  return icl::formats::KindOf(f.HasAttr("format") ? f.GetString("format") : std::string());
}

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

}  // namespace icl::python

// The order of the bindings is the order of registration: a signature names a class bound
// before it.
PYBIND11_MODULE(_core, m) {
  icl::python::BindProcess(m);
  icl::python::BindTargets(m);
  icl::python::BindProbes(m);
  icl::python::BindActivations(m);
  icl::python::BindExtract(m);
  icl::python::BindResultsFiles(m);
  icl::python::BindTransformer(m);
}
