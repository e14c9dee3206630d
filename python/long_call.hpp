// Long calls of the Python module: Ctrl-C and progress reports while the work runs without the
// GIL, and Torch's and OpenBLAS's pools kept serial for the call. Internal to python/.
#pragma once

#include <pybind11/pybind11.h>
// In every file of the module: a file without it would instantiate pybind11's generic caster for
// std::vector and the rest, and the linker would keep one of the two (an ODR violation that shows
// as "Unregistered type" at run time).
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <mutex>

#include "learners/kernel_threads.hpp"

namespace icl::python {

namespace py = pybind11;

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

// Torch's and OpenBLAS's pools serial for one call (extract's arithmetic: each group of prompts
// on one thread), the caller's settings given back after: the library's one rule.
using learners::SerialKernels;

}  // namespace icl::python
