// The Python module's reader of the results files of intervene, das, swap, erase and trace: each
// checked by its format's own reader, then read dataset by dataset.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/trace_file.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "intervene/das.hpp"
#include "intervene/erase.hpp"
#include "intervene/intervene.hpp"
#include "intervene/swap.hpp"
#include "python/bindings.hpp"

namespace icl::python {

namespace {

using icl::core::InputError;

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

}  // namespace icl::python
