// The root header of every iclprobe file (header.hpp).
#include "formats/header.hpp"

#include "core/errors.hpp"
#include "core/version.hpp"

namespace icl::formats {

std::string KindOf(const std::string& format) {
  const std::string prefix = kFormatPrefix;
  return format.size() > prefix.size() && format.compare(0, prefix.size(), prefix) == 0
             ? format.substr(prefix.size())
             : format;
}

void WriteHeader(h5::Group& root, const std::string& format, int version) {
  root.SetAttr(kFormatAttr, format);
  root.SetAttr(kVersionAttr, version);
  root.SetAttr(kCreatedByAttr, std::string(kCreatedBy));
}

Header CheckHeader(const h5::Group& root, const std::string& format, int newest_version) {
  const std::string where = "'" + root.file() + "'";
  if (!root.HasAttr(kFormatAttr))
    throw core::InputError(
        where, "",
        "has no 'format' attribute; expected an " + format + " file written by iclprobe");
  Header h;
  h.format = root.GetString(kFormatAttr);
  if (h.format != format)
    throw core::InputError(
        where, "", "has format '" + h.format.substr(0, 60) + "', expected '" + format + "'");
  const std::int64_t version = root.GetInt(kVersionAttr);
  if (version < 1 || version > newest_version)
    throw core::InputError(
        where, "",
        "has format_version " + std::to_string(version) + " of " + format +
            ", this iclprobe reads version " +
            (newest_version == 1 ? std::string("1") : "1.." + std::to_string(newest_version)));
  h.version = static_cast<int>(version);
  if (root.HasAttr(kCreatedByAttr)) h.created_by = root.GetString(kCreatedByAttr);
  return h;
}

}  // namespace icl::formats
