// The HDF5 layer and prompt-set files: round trips, attributes, refused files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/hdf5.hpp"
#include "core/open_once.hpp"
#include "core/sha256.hpp"
#include "data/prompt_io.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

data::PromptSet Prompts() {
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  t.noise = 0.1;
  return data::SamplePrompts(t, 77, 0, 8);
}

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Hdf5, AttributesRoundTrip) {
  test::TempDir tmp;
  const std::string path = tmp / "a.h5";
  {
    h5::File f = h5::File::Create(path);
    f.SetAttr("s", "héllo");
    f.SetAttr("i", std::int64_t{-5});
    f.SetAttr("x", 0.125);
    f.SetAttr("json", std::string("{\"a\": [1, 2]}"));
    f.SetAttr("i", std::int64_t{6});  // replacing works
    f.CreateGroup("g/h").SetAttr("deep", 1);
  }
  const h5::File f = h5::File::Open(path);
  EXPECT_EQ(f.GetString("s"), "héllo");
  EXPECT_EQ(f.GetInt("i"), 6);
  EXPECT_EQ(f.GetDouble("x"), 0.125);
  EXPECT_EQ(f.GetString("json"), "{\"a\": [1, 2]}");
  EXPECT_EQ(f.OpenGroup("g/h").GetInt("deep"), 1);
  EXPECT_TRUE(f.Exists("g/h"));
  EXPECT_FALSE(f.Exists("g/nope/deeper"));
  const std::string err = ErrorOf([&] { f.GetString("missing"); });
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("missing"), std::string::npos) << err;
  EXPECT_NE(ErrorOf([&] { f.GetInt("s"); }).find("expected an integer"), std::string::npos);
}

TEST(Hdf5, ExtendibleChunkedDatasetAppendsRows) {
  test::TempDir tmp;
  const std::string path = tmp / "d.h5";
  {
    h5::File f = h5::File::Create(path);
    h5::DatasetOptions o;
    o.chunk = {4, 3};
    o.extendible = true;
    o.deflate = 4;
    o.shuffle = true;
    h5::Dataset ds = f.CreateDataset<float>("grp/data", {0, 3}, o);
    std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9};
    ds.Append(2, a.data(), a.size());
    ds.Append(1, b.data(), b.size());
    // A buffer that does not hold the rows it is said to hold is refused before any I/O.
    EXPECT_THROW(ds.Append(1, a.data(), a.size()), std::logic_error);
    f.Flush();
  }
  const h5::File f = h5::File::Open(path);
  const h5::Dataset ds = f.OpenDataset("grp/data");
  EXPECT_EQ(ds.dims(), (h5::Dims{3, 3}));
  EXPECT_EQ(ds.ReadAll<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  std::vector<double> row(3);
  ds.ReadRows(1, 1, row.data(), row.size());  // converted to double on read
  EXPECT_EQ(row, (std::vector<double>{4, 5, 6}));
  EXPECT_THROW(ds.ReadRows(2, 2, row.data(), row.size()), std::runtime_error);  // past the end
  EXPECT_THROW(ds.ReadRows(0, 2, row.data(), row.size()), std::logic_error);    // 6 into 3
  EXPECT_EQ(f.Members(), (std::vector<std::string>{"grp"}));
}

TEST(Hdf5, CreateRefusesAnExistingFileAndOpenNamesMissingObjects) {
  test::TempDir tmp;
  const std::string path = tmp / "e.h5";
  { h5::File::Create(path); }
  EXPECT_THROW(h5::File::Create(path), std::runtime_error);
  EXPECT_NO_THROW(h5::File::Create(path, /*truncate=*/true));
  const h5::File f = h5::File::Open(path);
  const std::string err = ErrorOf([&] { f.OpenDataset("prompts/x"); });
  EXPECT_NE(err.find("/prompts/x"), std::string::npos) << err;
  EXPECT_NE(ErrorOf([&] { h5::File::Open(tmp / "none.h5"); }).find("no such file"),
            std::string::npos);
  { std::ofstream(tmp / "text.h5") << "not hdf5"; }
  EXPECT_NE(ErrorOf([&] { h5::File::Open(tmp / "text.h5"); }).find("not an HDF5 file"),
            std::string::npos);
}

// An in-memory file reads back what was written, two of one name coexist, and nothing reaches
// the disk, not even on Close().
TEST(Hdf5, InMemoryFileRoundTripsAndTouchesNoDisk) {
  test::TempDir tmp;
  const std::string name = tmp / "mem.h5";
  h5::File a = h5::File::CreateInMemory(name);
  h5::File b = h5::File::CreateInMemory(name);
  const std::vector<double> v = {1.5, -2.0, 3.25};
  a.CreateDataset<double>("x", {3}).Write(v.data(), v.size());
  b.SetAttr("n", std::int64_t(7));
  std::vector<double> back(3);
  a.OpenDataset("x").Read(back.data(), back.size());
  EXPECT_EQ(back, v);
  EXPECT_EQ(b.GetInt("n"), 7);
  EXPECT_FALSE(b.Exists("x"));
  a.Close();
  b.Close();
  EXPECT_FALSE(std::filesystem::exists(name));
  EXPECT_TRUE(std::filesystem::is_empty(std::string(tmp / "")));
}

TEST(PromptFiles, RoundTripIsExact) {
  test::TempDir tmp;
  const std::string path = tmp / "p.h5";
  const data::PromptSet s = Prompts();
  data::SavePromptSet(path, s, false);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  const data::PromptSet r = data::LoadPromptSet(path);
  EXPECT_EQ(r.task, s.task);
  EXPECT_EQ(r.seed, 77u);
  EXPECT_TRUE(arma::approx_equal(r.x, s.x, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(r.y, s.y, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(r.w, s.w, "absdiff", 0.0));
  // Row-major [N, n, d] on disk: element (i, j, c) is x_j[c] of prompt i.
  const h5::File f = h5::File::Open(path);
  const auto flat = f.OpenDataset("prompts/x").ReadAll<double>();
  EXPECT_EQ(flat[(2 * 5 + 4) * 3 + 1], s.x(1, 4, 2));
  // Never overwritten without force.
  EXPECT_THROW(data::SavePromptSet(path, s, false), std::invalid_argument);
  EXPECT_NO_THROW(data::SavePromptSet(path, s, true));
}

TEST(PromptFiles, WrongFormatOrMissingDatasetIsRefused) {
  test::TempDir tmp;
  const data::PromptSet s = Prompts();
  const std::string wrong = tmp / "wrong.h5";
  {
    h5::File f = h5::File::Create(wrong);
    data::WriteFormatAttrs(f, "iclprobe-checkpoint");
    data::WritePrompts(f, s);
  }
  std::string err = ErrorOf([&] { data::LoadPromptSet(wrong); });
  EXPECT_NE(err.find("format 'iclprobe-checkpoint', expected 'iclprobe-prompts'"),
            std::string::npos)
      << err;

  const std::string missing = tmp / "missing.h5";
  {
    h5::File f = h5::File::Create(missing);
    data::WriteFormatAttrs(f, data::kPromptsFormat);
    h5::Group g = f.CreateGroup("prompts");
    g.SetAttr("task_config", s.task.ToJson());
    g.SetAttr("seed", 1);
    g.CreateDataset<double>("x", {8, 5, 3}).Write(s.x.memptr(), s.x.n_elem);
  }
  err = ErrorOf([&] { data::LoadPromptSet(missing); });
  EXPECT_NE(err.find("no dataset '/prompts/y'"), std::string::npos) << err;

  const std::string shape = tmp / "shape.h5";
  {
    h5::File f = h5::File::Create(shape);
    data::WriteFormatAttrs(f, data::kPromptsFormat);
    h5::Group g = f.CreateGroup("prompts");
    g.SetAttr("task_config", s.task.ToJson());
    g.SetAttr("seed", 1);
    g.CreateDataset<double>("x", {8, 4, 3});
  }
  err = ErrorOf([&] { data::LoadPromptSet(shape); });
  EXPECT_NE(err.find("has shape [8, 4, 3], expected [8, 5, 3]"), std::string::npos) << err;

  const std::string bare = tmp / "bare.h5";
  { h5::File::Create(bare); }
  EXPECT_NE(ErrorOf([&] { data::LoadPromptSet(bare); }).find("no 'format' attribute"),
            std::string::npos);
}

// A string read must never take a list for a string: HDF5 would write one pointer per entry
// into a single char* (a stack overwrite). Every shape gives the right value or one refusal
// naming the file and the attribute.
TEST(Hdf5, StringAttributesOfEveryShapeReadOrAreRefused) {
  test::TempDir tmp;
  const std::string path = tmp / "shapes.h5";
  const std::vector<int> shapes = {-1, 0, 1, 3, 50};
  {
    h5::File f = h5::File::Create(path);
    const hid_t space = H5Screate(H5S_NULL);
    const hid_t a = H5Acreate2(f.id(), "null", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Aclose(a);
    H5Sclose(space);
    f.SetAttr("ints3", std::vector<std::int64_t>{1, 2, 3});
    f.SetAttr("json_list", std::string("[\"a\", \"b\"]"));
  }
  for (int n : shapes)
    for (bool fixed : {false, true})
      test::WriteStringAttribute(path, "/", (fixed ? "fix" : "var") + std::to_string(n), n, fixed);
  const h5::File f = h5::File::Open(path);
  for (bool fixed : {false, true}) {
    const std::string kind = fixed ? "fix" : "var";
    for (int n : shapes) {
      const std::string name = kind + std::to_string(n);
      SCOPED_TRACE(name);
      // One value: a scalar or a list of one entry.
      if (n == -1 || n == 1) {
        EXPECT_EQ(f.GetString(name), "s0");
      } else {
        const std::string err = ErrorOf([&] { f.GetString(name); });
        EXPECT_NE(err.find("expected a string, got a list of " + std::to_string(n) + " entries"),
                  std::string::npos)
            << err;
        EXPECT_NE(err.find(path), std::string::npos) << err;
        EXPECT_NE(err.find(name), std::string::npos) << err;
      }
      // A list: every entry, in order.
      if (n >= 0) {
        const auto list = f.GetStringList(name);
        ASSERT_EQ(list.size(), std::size_t(n));
        for (int i = 0; i < n; ++i)
          EXPECT_EQ(list[std::size_t(i)], "s" + std::to_string(i));
      } else {
        // A scalar string as a list must be a JSON array (older files); "s0" is not one.
        EXPECT_NE(ErrorOf([&] { f.GetStringList(name); }).find(name), std::string::npos);
      }
      // Never a number.
      EXPECT_NE(ErrorOf([&] { f.GetInt(name); }).find("expected an integer"), std::string::npos);
      EXPECT_NE(ErrorOf([&] { f.GetDouble(name); }).find("expected a number"), std::string::npos);
    }
  }
  EXPECT_EQ(f.GetStringList("json_list"), (std::vector<std::string>{"a", "b"}));
  // A list of numbers read as one number, and an empty (null) attribute, are refused.
  EXPECT_NE(ErrorOf([&] { f.GetInt("ints3"); }).find("got a list of 3 entries"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { f.GetDouble("ints3"); }).find("got a list of 3 entries"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { f.GetInt("null"); }).find("empty (null)"), std::string::npos);
  EXPECT_EQ(f.GetIntList("ints3"), (std::vector<std::int64_t>{1, 2, 3}));
}

// A chunked dataset's shape is only a claim: 10^12 unwritten doubles take no space on disk.
// Reading all of it is refused naming the dataset, before anything is allocated.
TEST(Hdf5, AReadOfMoreThanMemoryIsRefusedBeforeAllocating) {
  test::TempDir tmp;
  const std::string path = tmp / "huge.h5";
  {
    h5::File f = h5::File::Create(path);
    const hsize_t dims[1] = {hsize_t(1e12)}, chunk[1] = {1024};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(plist, 1, chunk);
    const hid_t ds =
        H5Dcreate2(f.id(), "huge", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(plist);
    H5Sclose(space);
  }
  const h5::File f = h5::File::Open(path);
  const std::string err = ErrorOf([&] { f.OpenDataset("huge").ReadAll<double>(); });
  EXPECT_NE(err.find("/huge"), std::string::npos) << err;
  EXPECT_NE(err.find("more than this machine's memory"), std::string::npos) << err;
}

// Within a run's scope a file read twice is the one open file (its descriptor is shared with
// the hash); a file rewritten since is read afresh; one written by the run is let go first.
TEST(Hdf5, OpenOnceSharesAReadFileAndNeverServesAStaleOne) {
  test::TempDir tmp;
  const std::string path = tmp / "a.h5";
  h5::File::Create(path).SetAttr("v", 1);
  const std::string digest = core::Sha256File(path);  // outside a scope: read from the path
  EXPECT_EQ(h5::OpenDescriptor(path), -1);
  {
    const h5::OpenOnce scope;
    EXPECT_EQ(h5::File::Open(path).GetInt("v"), 1);
    const int fd = h5::OpenDescriptor(path);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(core::Sha256File(path), digest);  // the same bytes, read through `fd`
    EXPECT_EQ(h5::File::Open(path).GetInt("v"), 1);
    EXPECT_EQ(h5::OpenDescriptor(path), fd);  // still the one open file
    // Written by the run itself: the held file is let go, the new value read back.
    h5::File::Open(path, h5::File::Mode::kReadWrite).SetAttr("v", 2);
    EXPECT_EQ(h5::OpenDescriptor(path), -1);
    EXPECT_EQ(h5::File::Open(path).GetInt("v"), 2);
    // Replaced by another writer (a new file under the same name): never the old one's value.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later modification time
    const std::string other = tmp / "b.h5";
    h5::File::Create(other).SetAttr("v", 3);
    std::filesystem::rename(other, path);
    EXPECT_EQ(h5::File::Open(path).GetInt("v"), 3);
  }
  EXPECT_EQ(h5::OpenDescriptor(path), -1);  // the scope closed what it held
}
