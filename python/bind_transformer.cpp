// The Python module's transformer: a checkpoint's model run as extract runs it, so that its states
// equal an activations file's bit for bit.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "core/thread_pool.hpp"
#include "data/task.hpp"
#include "extract/extract.hpp"
#include "extract/forward.hpp"
#include "learners/checkpoint.hpp"
#include "learners/model_config.hpp"
#include "python/arrays.hpp"
#include "python/bindings.hpp"
#include "python/long_call.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

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

}  // namespace

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

}  // namespace icl::python
