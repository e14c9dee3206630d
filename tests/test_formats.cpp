// The formats layer (formats/): a schema's writer and checked reader agree, the reader refuses
// what the schema does not allow (one line naming the file and what was expected), the tidy CSV
// and the documentation pages come from the schemas, and the version-1 files of every kind the
// layer owns (tests/fixtures/formats, written before it existed) still read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analysis/trace_file.hpp"
#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations_schema.hpp"
#include "formats/doc.hpp"
#include "formats/header.hpp"
#include "formats/reader.hpp"
#include "formats/schemas.hpp"
#include "formats/tidy.hpp"
#include "formats/writer.hpp"
#include "intervene/das.hpp"
#include "intervene/erase.hpp"
#include "intervene/intervene.hpp"
#include "intervene/swap.hpp"
#include "learners/checkpoint.hpp"
#include "probes/probes_file.hpp"
#include "probes/probes_schema.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using formats::AttrType;
using formats::Values;

// A small format of its own: two attributes, a [layer, k] table, a bound that may be NaN and a
// per-name dataset in a group.
const formats::Schema& TestSchema() {
  static const formats::Schema s = [] {
    formats::Schema s;
    s.format = "iclprobe-formats-test";
    s.version = 2;
    s.title = "A test format.";
    s.description = "Two tables.";
    s.owner = "`tests/test_formats.cpp`";
    s.sizes = {{"layer", "layers"}, {"k", "ks"}};
    s.attrs = {formats::Attr("name", AttrType::kString, "a name"),
               formats::Attr("ks", AttrType::kIntList, "the ks"),
               formats::Attr("rule", AttrType::kString, "a rule", "", "x = 1"),
               formats::AttrOn("group/<who>", "scale", AttrType::kDouble, "a scale")};
    s.datasets = {
        formats::Data("table", {"layer", "k"}, {"layer", "k"}, "a table"),
        formats::Data("table_lo", {"layer", "k"}, {"layer", "k"}, "a bound", Values::kFiniteOrNaN,
                      {{"undefined", "NaN: undefined"}}),
        formats::Data("group/<who>/row", {"k"}, {"k"}, "a row", Values::kFinite, {}, "sometimes")};
    return s;
  }();
  return s;
}

const formats::Sizes kSizes = {{"layer", 2}, {"k", 3}};

void WriteTestFile(const std::string& path) {
  formats::Writer w(path, TestSchema());
  w.SetAttr("name", "x");
  w.SetAttr("ks", std::vector<int>{1, 2, 3});
  w.Write("table", kSizes, {1, 2, 3, 4, 5, 6});
  w.Write("table_lo", kSizes, {1, NAN, 3, 4, 5, 6});
  w.Write("group/<who>/row", kSizes, {7, 8, 9}, {{"who", "a"}});
  w.SetAttr("scale", 0.5, "group/<who>", {{"who", "a"}});
  w.Close();
}

// "'PATH': TEXT" of the InputError f() throws, or what else happened.
template <class F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "accepted";
}

// A file's kind is its format without the prefix, for every format the schemas declare and for
// the older ones the Python module opens; other text is kept as it is.
TEST(Formats, KindIsTheFormatWithoutItsPrefix) {
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {formats::kInterventionsFormat, "interventions"},
      {formats::kSwapsFormat, "swaps"},
      {formats::kErasureFormat, "erasure"},
      {formats::kDasFormat, "das"},
      {formats::kTraceFormat, "trace"},
      {extract::schema::kFormat, "activations"},
      {probes::kProbesFormat, "probes"},
      {learners::kCheckpointFormat, "checkpoint"}};
  for (const auto& [format, kind] : kinds)
    EXPECT_EQ(formats::KindOf(format), kind);
  EXPECT_EQ(formats::KindOf("iclprobe-"), "iclprobe-");
  EXPECT_EQ(formats::KindOf("hdf5-something"), "hdf5-something");
  EXPECT_EQ(formats::KindOf(""), "");
}

TEST(Formats, SchemaWrittenThenReadBack) {
  test::TempDir dir;
  WriteTestFile(dir / "t.h5");
  const formats::Reader r(dir / "t.h5", TestSchema());
  EXPECT_EQ(r.header().format, "iclprobe-formats-test");
  EXPECT_EQ(r.header().version, 2);
  EXPECT_NE(r.header().created_by.find("iclprobe"), std::string::npos);
  EXPECT_EQ(r.String("name"), "x");
  EXPECT_EQ(r.String("rule"), "x = 1");  // the schema's fixed text, written by the writer
  EXPECT_EQ(r.IntList("ks"), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(r.Double("scale", "group/<who>", {{"who", "a"}}), 0.5);
  EXPECT_EQ(r.Read("table", kSizes), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(std::isnan(r.Read("table_lo", kSizes)[1]));
  EXPECT_EQ(r.Read("group/<who>/row", kSizes, {{"who", "a"}}), (std::vector<double>{7, 8, 9}));
  EXPECT_FALSE(r.Has("group/<who>/row", {{"who", "b"}}));
  EXPECT_EQ(r.file().OpenDataset("table").DimLabels(), (std::vector<std::string>{"layer", "k"}));
  EXPECT_EQ(r.file().OpenDataset("table_lo").GetString("undefined"), "NaN: undefined");
  // The tidy CSV of the two tables: a column per dimension, one per dataset, NaN empty.
  std::ostringstream csv;
  formats::WriteTidyCsv(csv, r, TestSchema(), {"table", "table_lo"}, kSizes,
                        {{"layer", {"0", "4"}}});
  EXPECT_EQ(csv.str(),
            "layer,k,table,table_lo\n0,0,1,1\n0,1,2,\n0,2,3,3\n4,0,4,4\n4,1,5,5\n4,2,6,6\n");
  // The documentation page names every dataset with its shape and labels.
  const std::string page = formats::DocPage(TestSchema());
  EXPECT_NE(page.find("| `/table` | [layer, k] | layer, k | float64 | finite | always |"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("`/group/<who>/row`"), std::string::npos);
  EXPECT_NE(page.find("`undefined`: NaN: undefined"), std::string::npos);
}

// Each refusal is one line naming the file and what was expected.
TEST(Formats, ReaderRefusesWhatTheSchemaDoesNotAllow) {
  test::TempDir dir;
  const std::string path = dir / "t.h5";
  const std::string where = "'" + path + "': ";
  const auto refused = [&](const std::string& expected, const auto& edit) {
    WriteTestFile(path);
    {
      h5::File f = h5::File::Open(path, h5::File::Mode::kReadWrite);
      edit(f);
      f.Close();
    }
    const std::string e = ErrorOf([&] {
      const formats::Reader r(path, TestSchema());
      r.Read("table", kSizes);
      r.Read("table_lo", kSizes);
    });
    EXPECT_EQ(e, where + expected);
    EXPECT_EQ(e.find('\n'), std::string::npos);
  };
  const auto replace = [](h5::File& f, const h5::Dims& dims) {
    ASSERT_GE(H5Ldelete(f.id(), "table", H5P_DEFAULT), 0);
    if (!dims.empty()) {
      const std::vector<double> v(dims.size() == 1 ? dims[0] : dims[0] * dims[1], 1.0);
      f.CreateDataset<double>("table", dims).Write(v.data(), v.size());
    }
  };
  refused("dataset /table has shape [6], expected [layer 2, k 3]",
          [&](h5::File& f) { replace(f, {6}); });
  refused("dataset /table has shape [2, 4], expected [layer 2, k 3]", [&](h5::File& f) {
    replace(f, {2, 4});
  });
  refused(
      "has no dataset /table (expected float64 [layer, k], as every iclprobe-formats-test "
      "file has)",
      [&](h5::File& f) { replace(f, {}); });
  refused("has format 'iclprobe-other', expected 'iclprobe-formats-test'",
          [](h5::File& f) { f.SetAttr("format", "iclprobe-other"); });
  refused("has format_version 3 of iclprobe-formats-test, this iclprobe reads version 1..2",
          [](h5::File& f) { f.SetAttr("format_version", 3); });
  refused("/table holds NaN or infinite values", [](h5::File& f) {
    const std::vector<double> v = {1, 2, NAN, 4, 5, 6};
    f.OpenDataset("table").Write(v.data(), v.size());
  });
  refused("/table_lo holds infinite values", [](h5::File& f) {  // a bound: NaN, not infinite
    const std::vector<double> v = {1, 2, INFINITY, 4, 5, 6};
    f.OpenDataset("table_lo").Write(v.data(), v.size());
  });
}

// A caller's bug is a std::logic_error, not a fault of a file: a name the schema lacks, a value
// of another type, a buffer of another size, a file closed without what every file has.
TEST(Formats, WriterRefusesWhatTheSchemaDoesNotDeclare) {
  test::TempDir dir;
  const auto bug = [&](const auto& f) {
    EXPECT_TRUE(test::ThrowsInternalError([&] {
      formats::Writer w(dir / "t.h5", TestSchema());
      f(w);
    }));
  };
  bug([](formats::Writer& w) { w.SetAttr("other", "x"); });
  bug([](formats::Writer& w) { w.SetAttr("name", 3); });
  bug([](formats::Writer& w) { w.Write("other", kSizes, {1}); });
  bug([](formats::Writer& w) { w.Write("table", kSizes, {1, 2, 3}); });
  bug([](formats::Writer& w) { w.Write("table", {{"layer", 2}}, {1, 2}); });
  bug([](formats::Writer& w) { w.Write("group/<who>/row", kSizes, {1, 2, 3}); });
  bug([](formats::Writer& w) {
    w.SetAttr("name", "x");
    w.Close();  // no ks, no table
  });
}

// docs/formats/<format>.md is what the schema generates; ICLPROBE_WRITE_FORMAT_DOCS=1 rewrites
// the pages instead (after a schema changed on purpose).
// Every format's schema: the result files' in formats/, and the older formats' declared by their
// owners (formats/ lies below them and cannot list them).
std::vector<const formats::Schema*> EverySchema() {
  std::vector<const formats::Schema*> all = formats::AllSchemas();
  all.insert(all.end(), {&construct::CheckpointSchema(), &extract::schema::ActivationsSchema(),
                         &probes::schema::ProbesSchema(), &data::PromptSetSchema()});
  return all;
}

TEST(Formats, DocPagesMatchTheSchemas) {
  const char* write = std::getenv("ICLPROBE_WRITE_FORMAT_DOCS");
  for (const formats::Schema* s : EverySchema()) {
    SCOPED_TRACE(s->format);
    if (write && std::string(write) == "1") formats::WriteDocPage(ICL_SOURCE_DIR, *s);
    const std::string path = formats::DocPagePath(ICL_SOURCE_DIR, *s);
    EXPECT_EQ(test::ReadFile(path), formats::DocPage(*s))
        << path << " differs from its schema: run this test with ICLPROBE_WRITE_FORMAT_DOCS=1";
  }
}

std::string Golden(const std::string& name) {
  return std::string(ICL_FIXTURES) + "/formats/" + name;
}

// Files written before the formats layer existed (format_version 1) read through its readers.
TEST(Formats, VersionOneFilesStillRead) {
  const intervene::InterveneResult i = intervene::ReadInterventionsFile(Golden("interventions.h5"));
  EXPECT_EQ(i.layers, std::vector<int>{2});
  EXPECT_EQ(i.ks, std::vector<int>{2});
  EXPECT_EQ(i.cells.at(0).observed.n_rows, 12u);
  EXPECT_EQ(i.response.name, "gd:0.05");
  const intervene::SwapResult s = intervene::ReadSwapsFile(Golden("swaps.h5"));
  EXPECT_EQ(s.references, (std::vector<std::string>{"model", "ols", "gd:0.05"}));
  EXPECT_EQ(s.model_change.n_elem, 2u * 2u * 12u);
  const intervene::ErasureResult e = intervene::ReadErasureFile(Golden("erasure.h5"));
  EXPECT_EQ(e.erased.n_elem, 12u);
  EXPECT_EQ(e.request.target, "xty");
  const intervene::DasResult d = intervene::ReadDasFile(Golden("das.h5"));
  EXPECT_EQ(d.ms, std::vector<int>{2});
  EXPECT_EQ(d.bases.at(0).n_cols, 2u);
  const analysis::TraceResult t = analysis::ReadTraceFile(Golden("trace.h5"), true);
  EXPECT_EQ(t.request.algorithms, std::vector<std::string>{"gd:0.05:2"});
  EXPECT_EQ(t.controls.size(), 1u);
  EXPECT_EQ(t.predictions.size(), 1u);
}

}  // namespace
}  // namespace icl
