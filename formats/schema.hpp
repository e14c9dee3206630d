// A file format written down once, as data: the format's name and version, its
// attributes and its datasets (path, shape, dimension labels, element type, the
// values it may hold, fixed attributes). The writer (writer.hpp), the checked
// reader (reader.hpp), the tidy CSV (tidy.hpp) and the documentation page
// (doc.hpp) all read the same Schema, so a new result file is a schema and the
// few lines that move its numbers.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace icl::formats {

// What an attribute holds; lists are array attributes (h5py shows numpy
// arrays).
enum class AttrType { kString, kInt, kDouble, kIntList, kStringList };
const char* AttrTypeName(AttrType type);  // "string", "int64", "float64", ...

// The values a dataset may hold: every value finite; finite or NaN (an
// undefined interval bound, as the dataset's attribute 'undefined' says); or
// anything (read as stored).
enum class Values { kFinite, kFiniteOrNaN, kAny };
const char* ValuesName(Values values);

struct AttrSpec {
  // The object the attribute sits on ("" = the root group), a path in the
  // schema's terms: "trace/<spec>/<side>" has placeholders <name> filled in by
  // the caller.
  std::string object;
  std::string name;
  AttrType type = AttrType::kString;
  std::string description;
  // "" = every file has it; else when it is there ("older files lack it",
  // "quantity w only").
  std::string when;
  // A text every file carries as it is (a rule the numbers follow): the writer
  // writes it.
  std::string value;
};

struct DatasetSpec {
  // Path from the root without the leading '/', placeholders as in
  // AttrSpec::object.
  std::string path;
  // The size of each dimension, named ("layer", "k", "pair"): the caller gives
  // every name's value (Sizes); a number ("1") is a fixed size.
  std::vector<std::string> shape;
  // One HDF5 dimension label (H5DS) per dimension, or none (empty).
  std::vector<std::string> labels;
  std::string description;
  Values values = Values::kFinite;
  // String attributes every such dataset carries, with their fixed text.
  std::vector<std::pair<std::string, std::string>> attrs;
  std::string when;  // as AttrSpec::when
  // Stored element: every dataset of these formats is float64, read and written
  // as double.
  std::string element = "float64";
};

struct Schema {
  std::string format;       // the root attribute 'format' ("iclprobe-" and the kind)
  int version = 1;          // format_version this program writes; it reads 1..version
  std::string title;        // one line: what the file holds
  std::string description;  // a paragraph for the documentation page
  // The modules that write and read it, and how ("`analysis/trace_file.cpp` through the formats
  // layer (`formats/`)").
  std::string owner;
  // What each size name of the shapes stands for ("layer": "the entries of
  // attribute 'layers'").
  std::vector<std::pair<std::string, std::string>> sizes;
  std::vector<AttrSpec> attrs;  // besides the header (format, format_version, created_by)
  std::vector<DatasetSpec> datasets;

  // The declaration of a dataset or attribute; std::logic_error when the schema
  // has none (a caller's bug, not a fault of the file).
  const DatasetSpec& Dataset(const std::string& path) const;
  const AttrSpec& Attr(const std::string& object, const std::string& name) const;
};

// Declarations that read as a table. A root attribute; `when` and `value` as in
// AttrSpec.
AttrSpec Attr(std::string name, AttrType type, std::string description, std::string when = "",
              std::string value = "");
// An attribute of the object `object` (a path with placeholders).
AttrSpec AttrOn(std::string object, std::string name, AttrType type, std::string description);
// A dataset; the fields as in DatasetSpec.
DatasetSpec Data(std::string path, std::vector<std::string> shape, std::vector<std::string> labels,
                 std::string description, Values values = Values::kFinite,
                 std::vector<std::pair<std::string, std::string>> attrs = {},
                 std::string when = "");

// Values of the size names of a shape: {"layer", 3}, {"k", 7}.
using Sizes = std::map<std::string, unsigned long long>;
// Values of the placeholders of a path: {"spec", "gd:0.05:2"}, {"side",
// "learner"}.
using Fill = std::map<std::string, std::string>;

// `path` with every <name> replaced by fill[name]; std::logic_error for a name
// fill lacks.
std::string FillPath(const std::string& path, const Fill& fill);
// Whether `path` is one of the paths `pattern` stands for: the same segments (between '/'),
// each <name> standing for one or more characters of its segment ("bases/state_<layer>_m_<m>"
// matches "bases/state_2_m_4", not "bases/state__m_4" or "bases/a/state_2_m_4").
bool PathMatches(const std::string& pattern, const std::string& path);
// Whether a path or name has a <name> placeholder.
bool HasPlaceholder(const std::string& pattern);
// The dimensions of `spec` for these sizes; std::logic_error for a size name
// `sizes` lacks.
std::vector<unsigned long long> ShapeOf(const DatasetSpec& spec, const Sizes& sizes);
// "[layer, k, pair]": the shape as written in messages and documentation.
std::string ShapeText(const std::vector<std::string>& shape);

}  // namespace icl::formats
