// Documentation pages from schemas (doc.hpp).
#include "formats/doc.hpp"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "formats/header.hpp"
#include "formats/text.hpp"

namespace icl::formats {

namespace {

// A table cell: '|' would end the cell.
std::string Cell(const std::string& text) {
  std::string out;
  for (const char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string When(const std::string& when) {
  return when.empty() ? "always" : Cell(when);
}

// An attribute of an object other than the root is there whenever its object is.
std::string AttrWhen(const AttrSpec& a) {
  return a.when.empty() && !a.object.empty() ? "with its object" : When(a.when);
}

std::string AttrTable(const Schema& s) {
  std::string out =
      "| object | attribute | type | present | description |\n|---|---|---|---|---|\n";
  out += fmt::format("| `/` | `{}` | string | always | `{}` |\n", kFormatAttr, s.format);
  out += fmt::format("| `/` | `{}` | int64 | always | {} (this program reads 1..{}) |\n",
                     kVersionAttr, s.version, s.version);
  out += fmt::format("| `/` | `{}` | string | always | the program, its version and commit |\n",
                     kCreatedByAttr);
  for (const AttrSpec& a : s.attrs)
    out += fmt::format("| `/{}` | `{}` | {} | {} | {}{} |\n", Cell(a.object), a.name,
                       AttrTypeName(a.type), AttrWhen(a), Cell(a.description),
                       a.value.empty() ? "" : ": \"" + Cell(a.value) + "\"");
  return out;
}

std::string DatasetTable(const Schema& s) {
  std::string out =
      "| dataset | shape | dimension labels | element | values | present | description | "
      "attributes |\n|---|---|---|---|---|---|---|---|\n";
  for (const DatasetSpec& d : s.datasets) {
    std::string attrs;
    for (const auto& [name, text] : d.attrs)
      attrs += (attrs.empty() ? "" : "; ") + fmt::format("`{}`: {}", name, Cell(text));
    out += fmt::format("| `/{}` | {} | {} | {} | {} | {} | {} | {} |\n", Cell(d.path),
                       ShapeText(d.shape), d.labels.empty() ? "(none)" : Joined(d.labels),
                       d.element, ValuesName(d.values), When(d.when), Cell(d.description), attrs);
  }
  return out;
}

}  // namespace

std::string DocPage(const Schema& s) {
  std::string out = fmt::format("# {} (format_version {})\n\n", s.format, s.version);
  out +=
      "<!-- Generated from the format's schema by the test Formats.DocPagesMatchTheSchemas; do "
      "not edit: run it with ICLPROBE_WRITE_FORMAT_DOCS=1 to rewrite. -->\n\n";
  out += s.title + "\n\n" + s.description + "\n\nWritten and read by " + s.owner +
         ". Shapes are row-major (h5py's order); `<name>` in a path or in an attribute's name "
         "stands for each value that the attributes or the description name.\n\n";
  out += "## Sizes\n\n| size | what it counts |\n|---|---|\n";
  for (const auto& [name, text] : s.sizes)
    out += fmt::format("| `{}` | {} |\n", name, Cell(text));
  out += "\n## Attributes\n\n" + AttrTable(s) + "\n## Datasets\n\n" + DatasetTable(s);
  return out;
}

std::string DocPagePath(const std::string& root, const Schema& s) {
  return root + "/docs/formats/" + s.format + ".md";
}

void WriteDocPage(const std::string& root, const Schema& s) {
  const std::string path = DocPagePath(root, s);
  std::ofstream out(path, std::ios::binary);
  out << DocPage(s);
  out.close();
  if (!out) throw std::runtime_error("formats: cannot write '" + path + "'");
}

}  // namespace icl::formats
