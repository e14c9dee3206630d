// Every file kind the formats layer writes is written as before it existed: the binary under
// test makes each kind from the inputs in tests/fixtures/formats (make.sh), and each file is
// compared with the golden one there, dataset by dataset (shape, element type, dimension labels,
// every value bit for bit) and attribute by attribute, and so is each tidy CSV.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/hdf5.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

namespace fs = std::filesystem;

// Attributes that differ between two runs of the same code, with the reason.
const std::map<std::string, std::string> kDiffersPerRun = {
    {"/@created_by", "the program's version and git commit, which every build changes"},
};

std::string Golden(const std::string& name) {
  return std::string(ICL_FIXTURES) + "/formats/" + name;
}

// An attribute's value as text, whatever its type (strings, integers, floats; scalars and
// lists), through the wrapper's checked getters.
std::string AttrText(const h5::Object& o, const std::string& name) {
  const hid_t a = H5Aopen(o.id(), name.c_str(), H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  const H5T_class_t c = H5Tget_class(t);
  H5Tclose(t);
  H5Aclose(a);
  const bool list = o.IsListAttr(name);
  std::string out = list ? "list:" : "scalar:";
  if (c == H5T_STRING) {
    if (!list) return out + o.GetString(name);
    for (const std::string& s : o.GetStringList(name))
      out += s + "\x1f";
  } else if (c == H5T_INTEGER) {
    if (!list) return out + std::to_string(o.GetInt(name));
    for (const std::int64_t v : o.GetIntList(name))
      out += std::to_string(v) + ",";
  } else if (c == H5T_FLOAT && !list) {
    const double v = o.GetDouble(name);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);  // bit for bit
  } else {
    out += "type class " + std::to_string(int(c));
  }
  return out;
}

void CompareAttrs(const h5::Object& golden, const h5::Object& fresh, std::vector<std::string>& d) {
  const std::vector<std::string> names = golden.AttrNames();
  if (names != fresh.AttrNames()) d.push_back(golden.name() + ": the attributes' names differ");
  for (const std::string& n : names) {
    if (n == "DIMENSION_LABELS" || kDiffersPerRun.count(golden.name() + "@" + n) ||
        !fresh.HasAttr(n))
      continue;
    if (AttrText(golden, n) != AttrText(fresh, n))
      d.push_back(golden.name() + " attribute '" + n + "' differs");
  }
}

void CompareDatasets(const h5::Dataset& g, const h5::Dataset& f, std::vector<std::string>& d) {
  if (g.dims() != f.dims() || g.IsFloat() != f.IsFloat() || g.ElementSize() != f.ElementSize()) {
    d.push_back(g.name() + ": shape or element type differs");
    return;
  }
  if (g.DimLabels() != f.DimLabels()) d.push_back(g.name() + ": dimension labels differ");
  const std::vector<double> a = g.ReadAll<double>(), b = f.ReadAll<double>();
  if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) != 0)
    d.push_back(g.name() + ": values differ");
}

bool IsGroup(const h5::Group& parent, const std::string& name) {
  const hid_t o = H5Oopen(parent.id(), name.c_str(), H5P_DEFAULT);
  const bool group = H5Iget_type(o) == H5I_GROUP;
  H5Oclose(o);
  return group;
}

// Every difference between the two groups and what is below them.
void CompareGroups(const h5::Group& g, const h5::Group& f, std::vector<std::string>& d) {
  CompareAttrs(g, f, d);
  const std::vector<std::string> members = g.Members();
  if (members != f.Members()) d.push_back(g.name() + ": the members differ");
  for (const std::string& m : members) {
    if (!f.Exists(m)) continue;
    if (IsGroup(g, m)) {
      CompareGroups(g.OpenGroup(m), f.OpenGroup(m), d);
    } else {
      const h5::Dataset gd = g.OpenDataset(m), fd = f.OpenDataset(m);
      CompareAttrs(gd, fd, d);
      CompareDatasets(gd, fd, d);
    }
  }
}

TEST(FormatsGolden, EveryKindIsWrittenAsBefore) {
  // The golden values were computed with OpenBLAS's SkylakeX kernels, which test_main.cpp pins
  // (and every child iclprobe inherits) on a CPU with AVX-512; other kernels sum in another
  // order and differ in the last digits, so the values could not be compared exactly.
  const char* kernels = std::getenv("OPENBLAS_CORETYPE");
  if (!kernels || std::string(kernels) != "SkylakeX")
    GTEST_SKIP() << "the golden files were made with OpenBLAS's SkylakeX kernels, which this CPU "
                    "does not run";
  test::TempDir dir;
  for (const char* input : {"gd.h5", "probes.h5"})
    fs::copy_file(Golden(input), dir / input);
  const test::CommandResult r =
      test::RunShell("cd '" + dir.path().string() + "' && OMP_WAIT_POLICY=passive sh '" +
                     Golden("make.sh") + "' '" + test::IclprobeBin() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string kind : {"interventions", "swaps", "erasure", "das", "trace"}) {
    SCOPED_TRACE(kind);
    const h5::File golden = h5::File::Open(Golden(kind + ".h5"));
    const h5::File fresh = h5::File::Open(dir / (kind + ".h5"));
    std::vector<std::string> differences;
    CompareGroups(golden, fresh, differences);
    for (const std::string& d : differences)
      ADD_FAILURE() << d;
    EXPECT_NE(golden.GetString("created_by"), "");
    // The tidy CSVs the commands write beside each file are unchanged too.
    for (const std::string csv : {".csv", ".layers.csv", ".rates.csv"}) {
      const std::string name = kind + csv;
      if (!fs::exists(Golden(name))) continue;
      EXPECT_EQ(test::ReadFile(dir / name), test::ReadFile(Golden(name))) << name;
    }
  }
}

}  // namespace
}  // namespace icl
