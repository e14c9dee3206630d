// The areas of the Python module, each bound by one function (bind_*.cpp, module.cpp), and
// called in order by PYBIND11_MODULE in module.cpp. Internal to python/.
#pragma once

#include <pybind11/pybind11.h>
// In every file of the module: a file without it would instantiate pybind11's generic caster for
// std::vector and the rest, and the linker would keep one of the two (an ODR violation that shows
// as "Unregistered type" at run time).
#include <pybind11/stl.h>

#include <string>

namespace icl::python {

namespace py = pybind11;

// What an iclprobe file is, by its root attribute `format`, in the formats' owners' terms:
// "activations", "probes", or the attribute as found ("" when it has none).
std::string FileKind(const std::string& path);

void BindProcess(py::module_& m);       // module.cpp
void BindTargets(py::module_& m);       // bind_targets.cpp
void BindProbes(py::module_& m);        // bind_probes.cpp
void BindActivations(py::module_& m);   // bind_activations.cpp
void BindExtract(py::module_& m);       // bind_extract.cpp
void BindResultsFiles(py::module_& m);  // bind_results_files.cpp
void BindTransformer(py::module_& m);   // bind_transformer.cpp

}  // namespace icl::python
