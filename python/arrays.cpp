// numpy arrays in and out of the Python module (arrays.hpp).
#include "python/arrays.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/spec.hpp"

namespace icl::python {

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

py::array_t<double> ToNumpy(const arma::mat& m) {
  py::array_t<double> a({py::ssize_t(m.n_cols), py::ssize_t(m.n_rows)});
  std::memcpy(a.mutable_data(), m.memptr(), sizeof(double) * m.n_elem);
  return a;
}
py::array_t<double> ToNumpy(const arma::vec& v) {
  py::array_t<double> a(py::ssize_t(v.n_elem));
  std::memcpy(a.mutable_data(), v.memptr(), sizeof(double) * v.n_elem);
  return a;
}

}  // namespace icl::python
