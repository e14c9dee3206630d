// Writing a file of a schema (writer.hpp).
#include "formats/writer.hpp"

#include <stdexcept>

#include "formats/header.hpp"

namespace icl::formats {

template <typename T>
void Writer::Set(const std::string& name, const T& value, const std::string& object,
                 const Fill& fill, AttrType type) {
  const AttrSpec& spec = schema_->Attr(object, name);
  if (spec.type != type)
    throw std::logic_error("formats: " + schema_->format + " attribute '" + name + "' is " +
                           AttrTypeName(spec.type) + ", written as " + AttrTypeName(type));
  written_.insert(object + "@" + name);
  if (object.empty()) {
    file_.SetAttr(name, value);
    return;
  }
  const std::string path = FillPath(object, fill);
  h5::Group g = file_.Exists(path) ? file_.OpenGroup(path) : file_.CreateGroup(path);
  g.SetAttr(name, value);
}

Writer::Writer(const std::string& path, const Schema& schema)
    : Writer(h5::File::Create(path, /*truncate=*/true), schema) {}

Writer::Writer(h5::File file, const Schema& schema) : file_(std::move(file)), schema_(&schema) {
  WriteHeader(file_, schema.format, schema.version);
  for (const AttrSpec& a : schema.attrs)
    if (!a.value.empty()) Set(a.name, a.value, a.object, {}, AttrType::kString);
}

void Writer::SetAttr(const std::string& name, const std::string& value, const std::string& object,
                     const Fill& fill) {
  Set(name, value, object, fill, AttrType::kString);
}
void Writer::SetAttr(const std::string& name, std::int64_t value, const std::string& object,
                     const Fill& fill) {
  Set(name, value, object, fill, AttrType::kInt);
}
void Writer::SetAttr(const std::string& name, double value, const std::string& object,
                     const Fill& fill) {
  Set(name, value, object, fill, AttrType::kDouble);
}
void Writer::SetAttr(const std::string& name, const std::vector<std::int64_t>& value,
                     const std::string& object, const Fill& fill) {
  Set(name, value, object, fill, AttrType::kIntList);
}
void Writer::SetAttr(const std::string& name, const std::vector<std::string>& value,
                     const std::string& object, const Fill& fill) {
  Set(name, value, object, fill, AttrType::kStringList);
}

void Writer::Write(const std::string& path, const Sizes& sizes, const double* values,
                   std::size_t count, const Fill& fill) {
  const DatasetSpec& spec = schema_->Dataset(path);
  const std::vector<unsigned long long> shape = ShapeOf(spec, sizes);
  const h5::Dims dims(shape.begin(), shape.end());
  h5::Dataset ds = spec.labels.empty()
                       ? file_.CreateDataset<double>(FillPath(path, fill), dims)
                       : file_.CreateDataset<double>(FillPath(path, fill), dims, spec.labels);
  ds.Write(values, count);  // the count is checked against the shape first
  for (const auto& [name, text] : spec.attrs)
    ds.SetAttr(name, text);
  written_.insert(path);
}

void Writer::Close() {
  for (const DatasetSpec& d : schema_->datasets)
    if (d.when.empty() && !written_.count(d.path))
      throw std::logic_error("formats: the " + schema_->format + " writer did not write /" +
                             d.path);
  for (const AttrSpec& a : schema_->attrs)
    if (a.when.empty() && !written_.count(a.object + "@" + a.name))
      throw std::logic_error("formats: the " + schema_->format +
                             " writer did not write attribute '" + a.name + "' on '/" + a.object +
                             "'");
  file_.Close();
}

}  // namespace icl::formats
