// Looking up a schema's declarations and filling its paths and shapes
// (schema.hpp).
#include "formats/schema.hpp"

#include <cctype>
#include <cstring>
#include <stdexcept>

namespace icl::formats {

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kString:
      return "string";
    case AttrType::kInt:
      return "int64";
    case AttrType::kDouble:
      return "float64";
    case AttrType::kIntList:
      return "int64 list";
    case AttrType::kStringList:
      return "string list";
  }
  return "?";
}

const char* ValuesName(Values values) {
  switch (values) {
    case Values::kFinite:
      return "finite";
    case Values::kFiniteOrNaN:
      return "finite or NaN (undefined)";
    case Values::kAny:
      return "any";
  }
  return "?";
}

AttrSpec Attr(std::string name, AttrType type, std::string description, std::string when,
              std::string value) {
  AttrSpec a;
  a.name = std::move(name);
  a.type = type;
  a.description = std::move(description);
  a.when = std::move(when);
  a.value = std::move(value);
  return a;
}

AttrSpec AttrOn(std::string object, std::string name, AttrType type, std::string description) {
  AttrSpec a = Attr(std::move(name), type, std::move(description));
  a.object = std::move(object);
  return a;
}

DatasetSpec Data(std::string path, std::vector<std::string> shape, std::vector<std::string> labels,
                 std::string description, Values values,
                 std::vector<std::pair<std::string, std::string>> attrs, std::string when) {
  DatasetSpec d;
  d.path = std::move(path);
  d.shape = std::move(shape);
  d.labels = std::move(labels);
  d.description = std::move(description);
  d.values = values;
  d.attrs = std::move(attrs);
  d.when = std::move(when);
  return d;
}

const DatasetSpec& Schema::Dataset(const std::string& path) const {
  for (const DatasetSpec& d : datasets)
    if (d.path == path) return d;
  throw std::logic_error("formats: " + format + " declares no dataset '" + path + "'");
}

const AttrSpec& Schema::Attr(const std::string& object, const std::string& name) const {
  for (const AttrSpec& a : attrs)
    if (a.object == object && a.name == name) return a;
  throw std::logic_error("formats: " + format + " declares no attribute '" + name + "' on '/" +
                         object + "'");
}

std::string FillPath(const std::string& path, const Fill& fill) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const std::size_t close = path[i] == '<' ? path.find('>', i) : std::string::npos;
    if (close == std::string::npos) {
      out += path[i];
      continue;
    }
    const auto it = fill.find(path.substr(i + 1, close - i - 1));
    if (it == fill.end())
      throw std::logic_error("formats: no value for " + path.substr(i, close - i + 1) + " in '" +
                             path + "'");
    out += it->second;
    i = close;
  }
  return out;
}

namespace {

// One segment against its pattern: a <name> takes one or more characters.
bool SegmentMatches(const char* pattern, const char* text) {
  if (*pattern == '\0') return *text == '\0';
  if (*pattern == '<') {
    const char* close = std::strchr(pattern, '>');
    if (close) {
      for (const char* rest = text + 1; *(rest - 1) != '\0'; ++rest)
        if (SegmentMatches(close + 1, rest)) return true;
      return false;
    }
  }
  return *pattern == *text && SegmentMatches(pattern + 1, text + 1);
}

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out(1);
  for (const char c : path) {
    if (c == '/')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

}  // namespace

bool PathMatches(const std::string& pattern, const std::string& path) {
  const std::vector<std::string> p = Segments(pattern), t = Segments(path);
  if (p.size() != t.size()) return false;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!SegmentMatches(p[i].c_str(), t[i].c_str())) return false;
  return true;
}

bool HasPlaceholder(const std::string& pattern) {
  const std::size_t open = pattern.find('<');
  return open != std::string::npos && pattern.find('>', open) != std::string::npos;
}

std::vector<unsigned long long> ShapeOf(const DatasetSpec& spec, const Sizes& sizes) {
  std::vector<unsigned long long> dims;
  for (const std::string& s : spec.shape) {
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      dims.push_back(std::stoull(s));
      continue;
    }
    const auto it = sizes.find(s);
    if (it == sizes.end())
      throw std::logic_error("formats: no size '" + s + "' for dataset '" + spec.path + "'");
    dims.push_back(it->second);
  }
  return dims;
}

std::string ShapeText(const std::vector<std::string>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + shape[i];
  return out + "]";
}

}  // namespace icl::formats
