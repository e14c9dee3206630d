// Writes one file of a schema: the header, then attributes and datasets by
// name, each checked against its declaration (a name the schema lacks, a value
// of another type or a buffer of another size is a caller's bug,
// std::logic_error), with the shape, dimension labels and fixed attributes the
// schema gives it. Close() checks that every always-present item was written.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/hdf5.hpp"
#include "formats/schema.hpp"

namespace icl::formats {

class Writer {
 public:
  // Creates `path` (replacing a file there: the caller writes under a temporary
  // name) and writes the header of `schema`, which must outlive the writer.
  Writer(const std::string& path, const Schema& schema);
  // The same into an open file or group (an in-memory file, a file being
  // assembled).
  Writer(h5::File file, const Schema& schema);

  // Root attributes; `object` and `fill` name another object
  // ("trace/<spec>/<side>").
  void SetAttr(const std::string& name, const std::string& value, const std::string& object = "",
               const Fill& fill = {});
  void SetAttr(const std::string& name, const char* value, const std::string& object = "",
               const Fill& fill = {}) {
    SetAttr(name, std::string(value), object, fill);
  }
  void SetAttr(const std::string& name, std::int64_t value, const std::string& object = "",
               const Fill& fill = {});
  void SetAttr(const std::string& name, int value, const std::string& object = "",
               const Fill& fill = {}) {
    SetAttr(name, static_cast<std::int64_t>(value), object, fill);
  }
  void SetAttr(const std::string& name, double value, const std::string& object = "",
               const Fill& fill = {});
  void SetAttr(const std::string& name, const std::vector<std::int64_t>& value,
               const std::string& object = "", const Fill& fill = {});
  void SetAttr(const std::string& name, const std::vector<int>& value,
               const std::string& object = "", const Fill& fill = {}) {
    SetAttr(name, std::vector<std::int64_t>(value.begin(), value.end()), object, fill);
  }
  void SetAttr(const std::string& name, const std::vector<std::string>& value,
               const std::string& object = "", const Fill& fill = {});

  // Dataset `path` (the schema's name, placeholders filled by `fill`) of the
  // shape its sizes give, row-major `values` (exactly that many).
  void Write(const std::string& path, const Sizes& sizes, const double* values, std::size_t count,
             const Fill& fill = {});
  void Write(const std::string& path, const Sizes& sizes, const std::vector<double>& values,
             const Fill& fill = {}) {
    Write(path, sizes, values.data(), values.size(), fill);
  }

  // std::logic_error unless every dataset and attribute without a `when` was
  // written, then closes the file (checked and synced).
  void Close();
  h5::File& file() { return file_; }

 private:
  template <typename T>
  void Set(const std::string& name, const T& value, const std::string& object, const Fill& fill,
           AttrType type);
  h5::File file_;
  const Schema* schema_;
  std::set<std::string> written_;  // declared paths, and "object@name" of attributes
};

}  // namespace icl::formats
