// Names that travel from files into file names and plot scripts (targets, probe families,
// sources): they must be plain, so that no file can smuggle a path or a command through them.
#pragma once

#include <cctype>
#include <string>

namespace icl::core {

// 1..64 characters of [A-Za-z0-9_.-], starting with a letter or digit.
inline bool IsPlainName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

}  // namespace icl::core
