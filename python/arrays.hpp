// numpy arrays in and out of the Python module: checked float arrays, list arguments, shapes in
// messages, and Armadillo matrices as numpy arrays. Internal to python/.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
// In every file of the module: a file without it would instantiate pybind11's generic caster for
// std::vector and the rest, and the linker would keep one of the two (an ODR violation that shows
// as "Unregistered type" at run time).
#include <pybind11/stl.h>

#include <armadillo>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.hpp"

namespace icl::python {

namespace py = pybind11;

// A float array of `rank` dimensions, as C-ordered float64 (a copy only when it is not one).
// float32 and float64 are accepted; anything else is refused naming the argument.
template <class T>
py::array_t<T, py::array::c_style> FloatArray(const py::array& a, const std::string& name, int rank,
                                              const std::string& shape) {
  const char kind = a.dtype().kind();
  if (kind != 'f' || (a.itemsize() != 4 && a.itemsize() != 8))
    throw core::InputError("iclprobe", name,
                           "expected a float32 or float64 array of shape " + shape +
                               ", got dtype " + std::string(py::str(a.dtype())));
  if (a.ndim() != rank)
    throw core::InputError("iclprobe", name,
                           "expected " + std::to_string(rank) + " dimensions " + shape + ", got " +
                               std::to_string(a.ndim()));
  auto out = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!out) throw core::InputError("iclprobe", name, "could not be read as " + shape);
  const T* p = out.data();
  for (py::ssize_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(double(p[i])))
      throw core::InputError("iclprobe", name,
                             "holds a value that is not finite at flat index " + std::to_string(i));
  return out;
}

// The entries of a list argument whose items may be comma lists themselves ("gd:0.05:3,newton:3"
// or ["gd:0.05:3", "newton:3"]): the CLI's one list splitter (core::SplitList), so an empty entry
// ("", "ols,") is refused naming the argument rather than skipped.
std::vector<std::string> ListArgument(const std::string& name,
                                      const std::vector<std::string>& items);

// "[2, 3, 4]".
std::string Shape(const std::vector<py::ssize_t>& dims);

// p x q column-major -> [q, p] row-major.
py::array_t<double> ToNumpy(const arma::mat& m);
py::array_t<double> ToNumpy(const arma::vec& v);

}  // namespace icl::python
