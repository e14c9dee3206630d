// Reading a file of a schema, checked (reader.hpp).
#include "formats/reader.hpp"

#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "formats/text.hpp"

namespace icl::formats {

namespace {

// "[layer 2, k 7]": the expected shape with its size names.
std::string ExpectedText(const DatasetSpec& spec, const std::vector<unsigned long long>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    out += i ? ", " : "";
    if (spec.shape[i] != std::to_string(dims[i])) out += spec.shape[i] + " ";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

}  // namespace

Reader::Reader(const std::string& path, const Schema& schema)
    : file_(h5::File::Open(path)), schema_(&schema), where_("'" + path + "'") {
  header_ = CheckHeader(file_, schema.format, schema.version);
}

const AttrSpec& Reader::Declared(const std::string& object, const std::string& name,
                                 AttrType type) const {
  const AttrSpec& spec = schema_->Attr(object, name);
  if (spec.type != type)
    throw std::logic_error("formats: " + schema_->format + " attribute '" + name + "' is " +
                           AttrTypeName(spec.type) + ", read as " + AttrTypeName(type));
  return spec;
}

bool Reader::HasAttr(const std::string& name, const std::string& object, const Fill& fill) const {
  schema_->Attr(object, name);
  if (object.empty()) return file_.HasAttr(name);
  const std::string path = FillPath(object, fill);
  return file_.Exists(path) && file_.OpenGroup(path).HasAttr(name);
}

// Each getter reads through the wrapper, whose messages name the file, the
// object and the attribute ("missing", "expected a string, got a list of 3").
#define ICL_FORMATS_GET(Method, Type, Getter)                                               \
  Type Reader::Method(const std::string& name, const std::string& object, const Fill& fill) \
      const {                                                                               \
    Declared(object, name, AttrType::Getter);                                               \
    if (object.empty()) return file_.Get##Method(name);                                     \
    return file_.OpenGroup(FillPath(object, fill)).Get##Method(name);                       \
  }
ICL_FORMATS_GET(String, std::string, kString)
ICL_FORMATS_GET(Int, std::int64_t, kInt)
ICL_FORMATS_GET(Double, double, kDouble)
ICL_FORMATS_GET(IntList, std::vector<std::int64_t>, kIntList)
ICL_FORMATS_GET(StringList, std::vector<std::string>, kStringList)
#undef ICL_FORMATS_GET

bool Reader::Has(const std::string& path, const Fill& fill) const {
  schema_->Dataset(path);
  return file_.Exists(FillPath(path, fill));
}

h5::Dataset Reader::Open(const DatasetSpec& spec, const Fill& fill) const {
  const std::string path = FillPath(spec.path, fill);
  if (!file_.Exists(path))
    throw core::InputError(
        where_, "",
        "has no dataset /" + path + " (expected " + spec.element + " " + ShapeText(spec.shape) +
            (spec.when.empty() ? ", as every " + schema_->format + " file has"
                               : ", which " + schema_->format + " files have " + spec.when) +
            ")");
  return file_.OpenDataset(path);
}

std::vector<unsigned long long> Reader::Dims(const std::string& path, const Fill& fill) const {
  const DatasetSpec& spec = schema_->Dataset(path);
  const h5::Dataset ds = Open(spec, fill);
  const h5::Dims dims = ds.dims();
  if (dims.size() != spec.shape.size())
    throw core::InputError(where_, "",
                           "dataset /" + FillPath(path, fill) + " has " +
                               std::to_string(dims.size()) + " dimensions, expected " +
                               std::to_string(spec.shape.size()) + " " + ShapeText(spec.shape));
  return std::vector<unsigned long long>(dims.begin(), dims.end());
}

std::vector<double> Reader::Read(const std::string& path, const Sizes& sizes,
                                 const Fill& fill) const {
  const DatasetSpec& spec = schema_->Dataset(path);
  const std::vector<unsigned long long> expected = ShapeOf(spec, sizes);
  const std::string name = "/" + FillPath(path, fill);
  const h5::Dataset ds = Open(spec, fill);
  const h5::Dims got = ds.dims();
  if (std::vector<unsigned long long>(got.begin(), got.end()) != expected)
    throw core::InputError(where_, "",
                           "dataset " + name + " has shape " + DimsText({got.begin(), got.end()}) +
                               ", expected " + ExpectedText(spec, expected));
  std::vector<double> v = ds.ReadAll<double>();
  if (spec.values == Values::kFinite) {
    for (const double x : v)
      if (!std::isfinite(x))
        throw core::InputError(where_, "", name + " holds NaN or infinite values");
  } else if (spec.values == Values::kFiniteOrNaN) {
    for (const double x : v)
      if (std::isinf(x)) throw core::InputError(where_, "", name + " holds infinite values");
  }
  return v;
}

}  // namespace icl::formats
