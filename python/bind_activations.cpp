// The Python module's view of an activations file, read through extract's one reader (its
// hostile-file checks included).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/task.hpp"
#include "extract/activations.hpp"
#include "probes/data_access.hpp"
#include "probes/source.hpp"
#include "python/bindings.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

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
  // The stored position of the state after k examples for each k (probes' layout: with
  // positions all the y-token of example k, 2k - 1; with positions y, k - 1).
  std::vector<int> AfterKPositions(const std::vector<int>& ks) const {
    const icl::probes::StatesInfo states = icl::probes::DescribeActivations(info_);
    std::vector<int> out;
    for (int k : ks) {
      if (k < 1 || k > states.n)
        throw InputError(
            "iclprobe", "ks",
            "k must be in 1.." + std::to_string(states.n) + ", got " + std::to_string(k));
      out.push_back(icl::probes::AfterKPosition(states, k));
    }
    return out;
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

}  // namespace

// An activations file, read through extract's reader.
void BindActivations(py::module_& m) {
  py::class_<Activations>(m, "Activations")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const Activations& a) { return a.info().path; })
      .def_property_readonly("prompts", [](const Activations& a) { return a.info().prompts; })
      .def_property_readonly("layers", [](const Activations& a) { return a.info().layers; })
      .def_property_readonly("targets", [](const Activations& a) { return a.info().targets; })
      .def_property_readonly(
          "positions",
          [](const Activations& a) { return icl::extract::PositionsName(a.info().positions); })
      .def_property_readonly("model_config",
                             [](const Activations& a) { return a.info().model.ToJson(); })
      .def_property_readonly("task_config",
                             [](const Activations& a) { return a.info().task.ToJson(); })
      .def_property_readonly("seed", [](const Activations& a) { return a.info().seed; })
      .def_property_readonly("checkpoint_sha256",
                             [](const Activations& a) { return a.info().checkpoint_sha256; })
      .def("hidden", &Activations::Hidden, py::arg("layer"))
      .def("target", &Activations::Target, py::arg("name"))
      .def("read_prompts", &Activations::Prompts)
      .def("after_k_positions", &Activations::AfterKPositions, py::arg("ks"));
}

}  // namespace icl::python
