// Reads one file of a schema, checked: the header first (the format's name, a
// version this program reads), then attributes and datasets by their declared
// names, each dataset refused before any memory is touched when its rank or
// size is not what the schema and the sizes say, and its values checked against
// the schema's rule (finite, finite or NaN). A fault of the file is a
// core::InputError naming the file and what was expected; a name the schema
// lacks is the caller's bug (std::logic_error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "formats/header.hpp"
#include "formats/schema.hpp"

namespace icl::formats {

class Reader {
 public:
  // Opens `path` for reading and checks its header against `schema` (which must
  // outlive the reader).
  Reader(const std::string& path, const Schema& schema);

  // "'runs/a.h5'": the file as messages name it.
  const std::string& where() const { return where_; }
  const Header& header() const { return header_; }
  const h5::File& file() const { return file_; }

  // Attributes of the root, or of `object` with its placeholders filled.
  bool HasAttr(const std::string& name, const std::string& object = "",
               const Fill& fill = {}) const;
  std::string String(const std::string& name, const std::string& object = "",
                     const Fill& fill = {}) const;
  std::int64_t Int(const std::string& name, const std::string& object = "",
                   const Fill& fill = {}) const;
  double Double(const std::string& name, const std::string& object = "",
                const Fill& fill = {}) const;
  std::vector<std::int64_t> IntList(const std::string& name, const std::string& object = "",
                                    const Fill& fill = {}) const;
  std::vector<std::string> StringList(const std::string& name, const std::string& object = "",
                                      const Fill& fill = {}) const;

  // Whether dataset `path` is in the file.
  bool Has(const std::string& path, const Fill& fill = {}) const;
  // The dimensions of dataset `path`, its rank checked: for a size the file
  // itself states.
  std::vector<unsigned long long> Dims(const std::string& path, const Fill& fill = {}) const;
  // Dataset `path`, row-major, of exactly the shape `sizes` give it, values
  // checked.
  std::vector<double> Read(const std::string& path, const Sizes& sizes,
                           const Fill& fill = {}) const;

 private:
  const AttrSpec& Declared(const std::string& object, const std::string& name, AttrType type) const;
  h5::Dataset Open(const DatasetSpec& spec, const Fill& fill) const;
  h5::File file_;
  const Schema* schema_;
  std::string where_;
  Header header_;
};

}  // namespace icl::formats
