// The Python module's regression targets of prompts given as arrays: the same ComputeTargets and
// learner weights as extract's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <armadillo>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/targets.hpp"
#include "data/task.hpp"
#include "extract/extract.hpp"
#include "python/arrays.hpp"
#include "python/bindings.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

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

}  // namespace

// Regression targets of prompts given as arrays.
void BindTargets(py::module_& m) {
  m.def("targets", &Targets, py::arg("x"), py::arg("y"), py::arg("ridge_lambda"),
        py::arg("learners"), py::arg("noise"), py::arg("w_scale"));
}

}  // namespace icl::python
