// The header every iclprobe file carries at its root: the format's name, the
// version of that format the file was written in (each format counts its own
// versions), and the program that wrote it. Files of every kind start and are
// first checked here.
#pragma once

#include <string>

#include "core/hdf5.hpp"

namespace icl::formats {

inline constexpr const char* kFormatAttr = "format";
inline constexpr const char* kVersionAttr = "format_version";
inline constexpr const char* kCreatedByAttr = "created_by";

// Every format's name starts with this; the rest is the file's kind.
inline constexpr const char* kFormatPrefix = "iclprobe-";

// The kind of file a format names, as the Python module's open() and messages call it: the
// format without its prefix (the probes format gives "probes"); any other text as it is.
std::string KindOf(const std::string& format);

struct Header {
  std::string format;
  int version = 0;
  std::string created_by;
};

// Writes format, format_version and created_by (this program's version and
// commit).
void WriteHeader(h5::Group& root, const std::string& format, int version);
// Reads the header and checks it: `format` is the file's, and its version is
// one this program reads (1..newest_version). Throws core::InputError naming
// the file and what was expected.
Header CheckHeader(const h5::Group& root, const std::string& format, int newest_version);

}  // namespace icl::formats
