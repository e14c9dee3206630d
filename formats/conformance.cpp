// A file checked against its schema, object by object (conformance.hpp).
#include "formats/conformance.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "formats/header.hpp"
#include "formats/text.hpp"

namespace icl::formats {

namespace {

// H5DS keeps the dimension labels in an attribute of the dataset itself.
constexpr const char* kDimLabelsAttr = "DIMENSION_LABELS";
// A hostile file may nest groups (or link one into itself) without end.
constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxObjects = 1000000;

std::string Shown(const std::string& path) {
  return "/" + path;
}

bool IsFixedSize(const std::string& size) {
  return !size.empty() && std::isdigit(static_cast<unsigned char>(size[0]));
}

// The type of a stored attribute in the words of AttrTypeName: "int64", "string list", ...
std::string StoredType(const h5::Object& object, const std::string& name) {
  const std::string element = object.AttrElement(name);
  const int rank = object.AttrRank(name);
  if (rank == 0) return element;
  if (rank == 1) return element + " list";
  return rank < 0 ? "an empty attribute" : element + " array of rank " + std::to_string(rank);
}

// Whether `path` is a proper prefix of one of the paths `pattern` stands for: a group on the way
// to a declared dataset or object.
bool LeadsTo(const std::string& pattern, const std::string& path) {
  std::size_t cut = std::string::npos;
  const std::size_t segments = std::count(path.begin(), path.end(), '/') + 1;
  std::size_t seen = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] == '/' && ++seen == segments) {
      cut = i;
      break;
    }
  return cut != std::string::npos && PathMatches(pattern.substr(0, cut), path);
}

class Checker {
 public:
  explicit Checker(const Schema& schema) : s_(schema) {
    out_.matched.assign(schema.datasets.size(), 0);
    described_.assign(schema.datasets.size(), false);
    for (const DatasetSpec& d : schema.datasets)
      if (!HasPlaceholder(d.path)) literal_datasets_.insert(d.path);
    literal_objects_ = literal_datasets_;
    for (const AttrSpec& a : schema.attrs)
      if (!HasPlaceholder(a.object)) literal_objects_.insert(a.object);
    header_ = {Attr(kFormatAttr, AttrType::kString, "the format"),
               Attr(kVersionAttr, AttrType::kInt, "the format's version"),
               Attr(kCreatedByAttr, AttrType::kString, "the program")};
  }

  Conformance Run(const h5::Group& root) {
    try {
      CheckHeader(root, s_.format, s_.version);
    } catch (const core::InputError& e) {
      Problem(e.text());
    }
    try {
      Attributes(root, "", false, {});
    } catch (const std::runtime_error& e) {  // an attribute HDF5 cannot read
      Problem("/: " + std::string(e.what()));
    }
    Walk(root, "", 0);
    for (std::size_t i = 0; i < s_.datasets.size(); ++i)
      if (s_.datasets[i].when.empty() && !described_[i])
        Problem("no dataset " + Shown(s_.datasets[i].path) + ", declared for every " + s_.format +
                " file");
    return out_;
  }

 private:
  void Problem(const std::string& text) { out_.problems.push_back(text); }

  void Walk(const h5::Group& group, const std::string& prefix, int depth) {
    if (depth > kMaxDepth) {
      Problem(Shown(prefix) + ": groups nested deeper than " + std::to_string(kMaxDepth));
      return;
    }
    for (const std::string& name : group.Members()) {
      if (++objects_ > kMaxObjects) {
        if (objects_ == kMaxObjects + 1)
          Problem("more than " + std::to_string(kMaxObjects) + " objects; the rest not checked");
        return;
      }
      const std::string path = prefix.empty() ? name : prefix + "/" + name;
      try {
        switch (group.TypeOf(name)) {
          case h5::ObjectType::kGroup: {
            const h5::Group g = group.OpenGroup(name);
            if (!GroupDeclared(path))
              Problem(Shown(path) + ": a group the schema does not declare");
            Attributes(g, path, false, {});
            Walk(g, path, depth + 1);
            break;
          }
          case h5::ObjectType::kDataset:
            Dataset(group.OpenDataset(name), path);
            break;
          case h5::ObjectType::kOther:
            Problem(Shown(path) + ": neither a group nor a dataset");
        }
      } catch (const std::runtime_error& e) {  // a link out of the file, external storage, ...
        Problem(Shown(path) + ": " + e.what());
      }
    }
  }

  bool GroupDeclared(const std::string& path) const {
    for (const DatasetSpec& d : s_.datasets)
      if (LeadsTo(d.path, path)) return true;
    for (const AttrSpec& a : s_.attrs)
      if (PathMatches(a.object, path) || LeadsTo(a.object, path)) return true;
    return false;
  }

  // The declarations of datasets that describe `path`.
  std::vector<std::size_t> Describing(const std::string& path) const {
    const bool literal = literal_datasets_.count(path) > 0;
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < s_.datasets.size(); ++i)
      if (literal ? s_.datasets[i].path == path
                  : HasPlaceholder(s_.datasets[i].path) && PathMatches(s_.datasets[i].path, path))
        out.push_back(i);
    return out;
  }

  // What differs between a stored dataset and one declaration of it (nothing when it conforms).
  static std::vector<std::string> Differences(const DatasetSpec& spec, const h5::Dataset& ds) {
    const h5::Dims dims = ds.dims();
    if (dims.size() != spec.shape.size())
      return {"has " + std::to_string(dims.size()) + " dimensions " + DimsText(dims) +
              ", declared " + std::to_string(spec.shape.size()) + " " + ShapeText(spec.shape)};
    std::vector<std::string> out;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (IsFixedSize(spec.shape[i]) && std::to_string(dims[i]) != spec.shape[i])
        out.push_back("dimension " + std::to_string(i) + " has size " + std::to_string(dims[i]) +
                      ", declared " + spec.shape[i]);
      for (std::size_t j = i + 1; j < dims.size(); ++j)
        if (spec.shape[i] == spec.shape[j] && dims[i] != dims[j])
          out.push_back("dimensions " + std::to_string(i) + " and " + std::to_string(j) +
                        " (both " + spec.shape[i] + ") have sizes " + std::to_string(dims[i]) +
                        " and " + std::to_string(dims[j]));
    }
    const std::vector<std::string> labels = ds.DimLabels();
    const bool unlabelled =
        std::all_of(labels.begin(), labels.end(), [](const std::string& l) { return l.empty(); });
    if (!spec.labels.empty() && labels != spec.labels)
      out.push_back((unlabelled ? std::string("has no dimension labels")
                                : "dimension labels (" + Joined(labels) + ")") +
                    ", declared (" + Joined(spec.labels) + ")");
    const std::string element = ds.Element();
    if (element != spec.element) out.push_back("holds " + element + ", declared " + spec.element);
    for (const auto& [name, text] : spec.attrs) {
      if (!ds.HasAttr(name)) {
        out.push_back("lacks attribute '" + name + "'");
        continue;
      }
      const std::string type = StoredType(ds, name);
      if (type != "string")
        out.push_back("attribute '" + name + "' is " + type + ", declared string");
      else if (ds.GetString(name) != text)
        out.push_back("attribute '" + name + "' is not the declared text \"" + text.substr(0, 60) +
                      (text.size() > 60 ? "...\"" : "\""));
    }
    return out;
  }

  void Dataset(const h5::Dataset& ds, const std::string& path) {
    const std::vector<std::size_t> candidates = Describing(path);
    if (candidates.empty()) {
      Problem(Shown(path) + ": a dataset the schema does not declare");
      return;
    }
    // The nearest declaration: one of the dataset's rank before any other, then the fewest
    // differences.
    std::vector<std::string> nearest;
    std::size_t nearest_distance = 0;
    bool conforms = false;
    std::vector<std::pair<std::string, std::string>> fixed;
    const std::size_t rank = ds.dims().size();
    for (const std::size_t i : candidates) {
      described_[i] = true;
      const std::vector<std::string> d = Differences(s_.datasets[i], ds);
      const std::size_t distance = d.size() + (s_.datasets[i].shape.size() != rank ? 1000 : 0);
      if (d.empty()) {
        conforms = true;
        ++out_.matched[i];
      } else if (nearest.empty() || distance < nearest_distance) {
        nearest = d;
        nearest_distance = distance;
      }
      for (const auto& a : s_.datasets[i].attrs)
        fixed.push_back(a);
    }
    if (!conforms)
      Problem(Shown(path) + ": " +
              (candidates.size() > 1 ? "matches none of its " + std::to_string(candidates.size()) +
                                           " declarations; the nearest: "
                                     : "") +
              Joined(nearest));
    Attributes(ds, path, true, fixed);
  }

  // The attributes of `object`: each declared (by the schema, or as a fixed attribute of the
  // dataset's declarations, whose text Differences checks) and of its declared type, and each
  // declared without a condition there.
  void Attributes(const h5::Object& object, const std::string& path, bool dataset,
                  const std::vector<std::pair<std::string, std::string>>& fixed) {
    std::vector<const AttrSpec*> specs;
    const bool literal = path.empty() || literal_objects_.count(path) > 0;
    if (path.empty())
      for (const AttrSpec& a : header_)
        specs.push_back(&a);
    for (const AttrSpec& a : s_.attrs)
      if (literal ? a.object == path : HasPlaceholder(a.object) && PathMatches(a.object, path))
        specs.push_back(&a);
    std::set<const AttrSpec*> present;
    for (const std::string& name : object.AttrNames()) {
      if (dataset && name == kDimLabelsAttr) continue;
      if (std::any_of(fixed.begin(), fixed.end(), [&](const auto& f) { return f.first == name; }))
        continue;
      const AttrSpec* spec = nullptr;
      for (const AttrSpec* a : specs)
        if (a->name == name || (HasPlaceholder(a->name) && PathMatches(a->name, name))) {
          spec = a;
          break;
        }
      const std::string where = Shown(path) + ": attribute '" + name + "'";
      if (!spec) {
        Problem(where + " is not declared");
        continue;
      }
      present.insert(spec);
      const std::string type = StoredType(object, name);
      if (type != AttrTypeName(spec->type))
        Problem(where + " is " + type + ", declared " + AttrTypeName(spec->type));
      else if (!spec->value.empty() && object.GetString(name) != spec->value)
        Problem(where + " is not the declared text \"" + spec->value.substr(0, 60) +
                (spec->value.size() > 60 ? "...\"" : "\""));
    }
    for (const AttrSpec* a : specs)
      if (a->when.empty() && !present.count(a))
        Problem(Shown(path) + ": lacks attribute '" + a->name + "', declared for every " +
                (path.empty() ? s_.format + " file" : "such object"));
  }

  const Schema& s_;
  Conformance out_;
  // Declared paths without placeholders: of datasets, and of datasets and attributes' objects.
  std::set<std::string> literal_datasets_, literal_objects_;
  std::vector<AttrSpec> header_;
  // Per declaration of a dataset: whether some dataset of the file lies at a path it describes
  // (conforming or not: a dataset there that does not conform is one fault, not two).
  std::vector<bool> described_;
  std::size_t objects_ = 0;
};

}  // namespace

Conformance ConformanceOf(const h5::Group& root, const Schema& schema) {
  return Checker(schema).Run(root);
}

Conformance ConformanceOf(const std::string& path, const Schema& schema) {
  const h5::File file = h5::File::Open(path);
  return ConformanceOf(file, schema);
}

void CheckConforms(const std::string& path, const Schema& schema) {
  const Conformance c = ConformanceOf(path, schema);
  if (c.problems.empty()) return;
  constexpr std::size_t kShown = 5;
  std::string text = "is not what the " + schema.format + " schema declares: ";
  for (std::size_t i = 0; i < std::min(kShown, c.problems.size()); ++i)
    text += (i ? "; " : "") + c.problems[i];
  if (c.problems.size() > kShown)
    text += "; and " + std::to_string(c.problems.size() - kShown) + " more";
  throw core::InputError("'" + path + "'", "", text);
}

}  // namespace icl::formats
