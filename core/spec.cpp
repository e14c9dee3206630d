// Specs and whole-string numbers (core/spec.hpp).
#include "core/spec.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/errors.hpp"

namespace icl::core {

std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<long long> ParseInteger(const std::string& text, long long lo, long long hi) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size() || errno == ERANGE || v < lo || v > hi) return std::nullopt;
  return v;
}

std::vector<std::string> SplitList(const std::string& module, const std::string& field,
                                   const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') {
      item += text[i];
      continue;
    }
    const auto b = item.find_first_not_of(" \t");
    if (b == std::string::npos) {
      const std::string shown = text.size() > 200 ? text.substr(0, 200) + "..." : text;
      throw InputError(module, field,
                       text.find_first_not_of(" \t") == std::string::npos
                           ? "expected a comma list, got an empty value"
                           : "entry " + std::to_string(out.size() + 1) + " of '" + shown +
                                 "' is empty (a stray comma?)");
    }
    out.push_back(item.substr(b, item.find_last_not_of(" \t") - b + 1));
    item.clear();
  }
  return out;
}

Spec ParseSpec(const std::string& raw) {
  Spec s;
  const auto b = raw.find_first_not_of(" \t");
  s.text = b == std::string::npos ? "" : raw.substr(b, raw.find_last_not_of(" \t") - b + 1);
  const auto colon = s.text.find(':');
  s.name = s.text.substr(0, colon);
  if (colon == std::string::npos) return s;
  std::string item;
  for (std::size_t i = colon + 1; i <= s.text.size(); ++i) {
    if (i == s.text.size() || s.text[i] == ':') {
      s.args.push_back(item);
      item.clear();
    } else {
      item += s.text[i];
    }
  }
  return s;
}

}  // namespace icl::core
