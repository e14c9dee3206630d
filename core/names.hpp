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

// A text as one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, a
// quote or a line break (a file path may), as itself otherwise.
inline std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string q = "\"";
  for (char c : text)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace icl::core
