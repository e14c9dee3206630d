// Reliability, by class of defect, against the built binary: no input runs a command; no input
// crashes it (exit 0 or 2, never a signal); a full disk or failed write never leaves a
// finished-looking output, and a resume after it equals an uninterrupted run; --force never
// replaces an input or a non-regular file; two writers never share an output; what cannot be
// right is refused before work starts; messages name what is wrong.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "analysis/report.hpp"
#include "core/hdf5.hpp"
#include "core/process.hpp"
#include "intervene/das.hpp"
#include "intervene/swap.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::CountLines;
using test::RunIclprobe;
using test::RunShell;
using test::RunShellWithFileLimit;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTiny = "--d 3 --n 5 --layers 2 --hidden 16 --heads 2 ";

// Shared inputs, made once: an untrained learner, a short resumable run, its activations, probes.
class Reliability : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto run = [](const std::string& args) {
      const auto r = RunIclprobe(args);
      ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    };
    run("train " + kTiny + "--init-only --seed 5 --quiet --out " + In("init.h5"));
    run("train " + kTiny +
        "--steps 20 --batch 8 --eval-every 10 --save-every 10 --eval-prompts 16 " +
        "--threads 1 --quiet --out " + In("run.h5"));
    run("extract -c " + In("init.h5") + " --prompts 200 --threads 1 --quiet --out " +
        In("acts.h5"));
    run("probe -a " + In("acts.h5") + " --targets xty,w_ols --probes ridge --k 3,5 --threads 1 " +
        "--codelength --codelength-blocks 0.1,0.5,1 --quiet --out " + In("probes.h5") + " --csv " +
        In("probes.csv"));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string In(const std::string& name) { return *dir_ / name; }
  // A private copy of a shared input, to mutate.
  static std::string Copy(const TempDir& tmp, const std::string& name) {
    const std::string to = tmp / name;
    fs::copy_file(In(name), to, fs::copy_options::overwrite_existing);
    return to;
  }
  static TempDir* dir_;
};
TempDir* Reliability::dir_ = nullptr;

// Exit 2 with one line on stderr: the documented way of refusing input. A crash would show as
// 128 + signal (the shell's report of a killed child), a hang as 124 (timeout).
void ExpectRefused(const test::CommandResult& r, const std::string& what,
                   const std::string& message = "") {
  EXPECT_EQ(r.exit_code, 2) << what << "\nstderr: " << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << what << "\nstderr: " << r.err;
  if (!message.empty()) {
    EXPECT_NE(r.err.find(message), std::string::npos) << what << "\nstderr: " << r.err;
  }
}

std::string Bytes(const std::string& path) {
  return test::ReadFile(path);
}

void SetStringAttr(const std::string& file, const std::string& object, const std::string& attr,
                   const std::string& value) {
  h5::File f = h5::File::Open(file, h5::File::Mode::kReadWrite);
  if (object == "/") {
    f.SetAttr(attr, value);
  } else {
    h5::Group g = f.OpenGroup(object);
    g.SetAttr(attr, value);
  }
}

void DeleteLink(const std::string& file, const std::string& object) {
  h5::File f = h5::File::Open(file, h5::File::Mode::kReadWrite);
  ASSERT_GE(H5Ldelete(f.id(), object.c_str(), H5P_DEFAULT), 0) << object;
}

void ReplaceDataset(const std::string& file, const std::string& object, const h5::Dims& dims,
                    double fill) {
  if (h5::File::Open(file).Exists(object)) DeleteLink(file, object);  // or adds it
  h5::File f = h5::File::Open(file, h5::File::Mode::kReadWrite);
  std::size_t count = 1;
  for (auto d : dims)
    count *= d;
  std::vector<double> v(count, fill);
  auto ds = f.CreateDataset<double>(object, dims);
  ds.Write(v.data(), v.size());
}

void Truncate(const std::string& path, double fraction) {
  fs::resize_file(path, static_cast<std::uintmax_t>(fs::file_size(path) * fraction));
}

// Holds the output lock of `path` as a second writer would.
class HeldLock {
 public:
  explicit HeldLock(const std::string& path) {
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0);
  }
  ~HeldLock() { ::close(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace

// ---- No input runs a command ------------------------------------------------------------

TEST(GnuplotQuote, QuotesAreDoubledAndNewlinesDropped) {
  EXPECT_EQ(analysis::GnuplotQuote("a'b\nc"), "'a''bc'");
  EXPECT_EQ(analysis::GnuplotQuote("x' ; system('id') ; print '"),
            "'x'' ; system(''id'') ; print '''");
}

TEST_F(Reliability, NamesFromAProbesFileNeverReachGnuplotAsCode) {
  TempDir tmp;
  const std::string probes = Copy(tmp, "probes.h5");
  const std::string pwned = tmp / "PWNED";
  const std::string evil = "x' ; system('touch PWNED') ; print '";  // run from inside tmp
  {
    h5::File f = h5::File::Open(probes, h5::File::Mode::kReadWrite);
    ASSERT_GE(H5Lmove(f.id(), "metrics/xty", f.id(), ("metrics/" + evil).c_str(), H5P_DEFAULT,
                      H5P_DEFAULT),
              0);
  }
  const auto r = RunShell("cd '" + tmp.path().string() + "' && '" + test::IclprobeBin() +
                          "' report --probes " + probes + " --plot-dir plots");
  ExpectRefused(r, "evil target name", "not a plain name");
  EXPECT_FALSE(fs::exists(pwned));
  // The same for a source name (stored list) and a path-like target name.
  const std::string p2 = tmp / "p2.h5";
  fs::copy_file(In("probes.h5"), p2);
  SetStringAttr(p2, "/", "sources", "[\"model\",\"../../x'; system('touch PWNED')\"]");
  ExpectRefused(RunShell("cd '" + tmp.path().string() + "' && '" + test::IclprobeBin() +
                         "' report --probes " + p2 + " --plot-dir plots"),
                "evil source name", "not a plain name");
  EXPECT_FALSE(fs::exists(pwned));
}

TEST_F(Reliability, PlotDirIsAPathNotACommand) {
  TempDir tmp;
  const std::string dir = "p'; touch INJECTED; echo '";
  const auto r = RunShell("cd '" + tmp.path().string() + "' && '" + test::IclprobeBin() +
                          "' report --probes " + In("probes.h5") + " --plot-dir \"" + dir + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "INJECTED"));
  EXPECT_GT(fs::file_size(fs::path(tmp / dir) / "xty_r2_by_layer.png"), 0u);
}

TEST_F(Reliability, ControlFilesWithOddNamesAreRefusedByProbe) {
  TempDir tmp;
  const std::string odd = tmp / "a'b;c.h5";
  fs::copy_file(In("acts.h5"), odd);
  ExpectRefused(RunIclprobe("probe -a " + In("acts.h5") + " --control \"" + odd +
                            "\" --probes ridge --k 2 --quiet --out " + (tmp / "p.h5")),
                "odd control name", "must be plain");
  EXPECT_FALSE(fs::exists(tmp / "p.h5"));
}

// ---- No crash on any input; refuse what cannot be right ---------------------------

struct Mutation {
  std::string name;
  std::function<void(const std::string&)> apply;
};

// Applies each mutation to a fresh copy of `input` and runs `command` (with {} replaced by the
// copy): always exit 2 with one line, never a crash, never a hang, never an output.
void ExpectEveryMutationRefused(const std::string& input, const std::vector<Mutation>& mutations,
                                const std::string& command) {
  for (const auto& m : mutations) {
    TempDir tmp;
    const std::string copy = tmp / fs::path(input).filename().string();
    fs::copy_file(input, copy);
    m.apply(copy);
    std::string cmd = command;
    cmd.replace(cmd.find("{}"), 2, copy);
    if (cmd.find("{out}") != std::string::npos) cmd.replace(cmd.find("{out}"), 5, tmp / "out");
    const auto r = RunShell("timeout 60 '" + test::IclprobeBin() + "' " + cmd);
    ExpectRefused(r, m.name + ": " + cmd);
    EXPECT_FALSE(fs::exists(tmp / "out")) << m.name;
  }
}

std::vector<Mutation> FileMutations() {
  return {
      {"truncated to half", [](const std::string& p) { Truncate(p, 0.5); }},
      {"truncated to 100 bytes", [](const std::string& p) { fs::resize_file(p, 100); }},
      {"empty", [](const std::string& p) { fs::resize_file(p, 0); }},
      {"random bytes",
       [](const std::string& p) { std::ofstream(p, std::ios::trunc) << std::string(5000, 'x'); }},
      {"a FIFO",
       [](const std::string& p) {
         fs::remove(p);
         ::mkfifo(p.c_str(), 0644);
       }},
      {"a folder",
       [](const std::string& p) {
         fs::remove(p);
         fs::create_directory(p);
       }},
  };
}

TEST_F(Reliability, HostileCheckpointsAreRefusedByEveryReader) {
  const std::string good = "{\"d\":3,\"n_max\":5,\"layers\":2,\"hidden\":16,\"heads\":2}";
  std::vector<Mutation> m = FileMutations();
  auto model = [](const std::string& json) {
    return [json](const std::string& p) { SetStringAttr(p, "/", "model_config", json); };
  };
  m.push_back({"d 4.7", model("{\"d\":4.7,\"n_max\":5,\"layers\":2,\"hidden\":16,\"heads\":2}")});
  m.push_back({"layers 2^32+8",
               model("{\"d\":3,\"n_max\":5,\"layers\":4294967304,\"hidden\":16,\"heads\":2}")});
  m.push_back(
      {"d negative", model("{\"d\":-3,\"n_max\":5,\"layers\":2,\"hidden\":16,\"heads\":2}")});
  m.push_back({"hidden huge",
               model("{\"d\":3,\"n_max\":5,\"layers\":2,\"hidden\":1000000000,\"heads\":2}")});
  m.push_back(
      {"d as a string", model("{\"d\":\"3\",\"n_max\":5,\"layers\":2,\"hidden\":16,\"heads\":2}")});
  m.push_back({"not JSON", model("{\"d\":3,")});
  m.push_back({"a JSON array", model("[1,2]")});
  m.push_back({"missing fields", model("{\"d\":3}")});
  m.push_back({"step negative", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("step", std::int64_t(-3));
               }});
  m.push_back({"step a float", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("step", 1.5);
               }});
  m.push_back({"NaN parameter", [](const std::string& p) {
                 ReplaceDataset(p, "params/readout.weight", {1, 16}, NAN);
               }});
  m.push_back({"misshapen parameter", [](const std::string& p) {
                 ReplaceDataset(p, "params/readout.weight", {16, 1}, 0.0);
               }});
  m.push_back(
      {"missing parameter", [](const std::string& p) { DeleteLink(p, "params/readout.weight"); }});
  m.push_back({"train task n beyond n_max", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 std::string j = f.GetString("train_config");
                 j.replace(j.find("\"n\":5"), 5, "\"n\":50");
                 f.SetAttr("train_config", j);
               }});
  (void)good;
  ExpectEveryMutationRefused(In("init.h5"), m, "inspect {} --export {out}");
  ExpectEveryMutationRefused(In("init.h5"), m, "extract -c {} --prompts 10 --quiet --out {out}");
  // baselines and compare read checkpoints through the same LoadCheckpoint; one case each
  // shows that they refuse, too.
  ExpectEveryMutationRefused(In("init.h5"), {m[0], m[m.size() - 3]},
                             "baselines --checkpoint {} --prompts 10 --learners ols --csv {out}");
  ExpectEveryMutationRefused(
      In("init.h5"), {m[1], m[m.size() - 3]},
      "compare -c {} --prompts 10 --ilwd-prompts 2 --learners ols --quiet --csv {out}");
}

TEST_F(Reliability, StoredTrainConfigurationsPassValidateOnResume) {
  std::vector<Mutation> m;
  for (const std::string& field :
       std::vector<std::string>{"eval_every", "save_every", "eval_prompts", "batch"})
    m.push_back({field + " 0", [field](const std::string& p) {
                   h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                   std::string j = f.GetString("train_config");
                   const auto at = j.find("\"" + field + "\":");
                   const auto end = j.find_first_of(",}", at);
                   j.replace(at, end - at, "\"" + field + "\":0");
                   f.SetAttr("train_config", j);
                 }});
  m.push_back({"steps negative", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 std::string j = f.GetString("train_config");
                 j.replace(j.find("\"steps\":20"), 10, "\"steps\":-20");
                 f.SetAttr("train_config", j);
               }});
  m.push_back({"lr NaN-like string", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 std::string j = f.GetString("train_config");
                 const auto at = j.find("\"lr\":");
                 j.replace(at, j.find(',', at) - at, "\"lr\":\"nan\"");
                 f.SetAttr("train_config", j);
               }});
  for (const auto& x : m) {
    TempDir tmp;
    const std::string run = tmp / "run.h5";
    fs::copy_file(In("run.h5"), run);
    x.apply(run);
    const auto r = RunShell("timeout 60 '" + test::IclprobeBin() +
                            "' train --resume --quiet --threads 1 --out " + run);
    ExpectRefused(r, x.name);
  }
}

TEST_F(Reliability, HostileActivationsAreRefusedByProbe) {
  std::vector<Mutation> m = FileMutations();
  auto attr = [](const std::string& name, const std::string& v) {
    return [name, v](const std::string& p) { SetStringAttr(p, "/", name, v); };
  };
  m.push_back({"layer 99 listed", attr("layers", "[0,1,99]")});
  m.push_back({"negative layer", attr("layers", "[-1]")});
  m.push_back({"layers not a list", attr("layers", "{\"a\":1}")});
  m.push_back({"positions unknown", attr("positions", "zz")});
  m.push_back({"n 0 in task", attr("task_config", "{\"d\":3,\"n\":0,\"w_scale\":1,\"noise\":0}")});
  m.push_back({"prompts negative", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("prompts", std::int64_t(-5));
               }});
  m.push_back({"prompts 10^12", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("prompts", std::int64_t(1000000000000));
                 f.SetAttr("n_complete", std::int64_t(1000000000000));
               }});
  m.push_back({"n_complete a float", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("n_complete", 200.0);
               }});
  m.push_back({"misshapen target", [](const std::string& p) {
                 ReplaceDataset(p, "targets/xty", {200, 2, 3}, 0.0);
               }});
  m.push_back(
      {"missing hidden layer", [](const std::string& p) { DeleteLink(p, "hidden/layer_01"); }});
  m.push_back({"NaN target", [](const std::string& p) {
                 ReplaceDataset(p, "targets/xty", {200, 5, 3}, NAN);
               }});
  ExpectEveryMutationRefused(In("acts.h5"), m,
                             "probe -a {} --targets xty --probes ridge --k 2 --quiet --out {out}");
}

TEST_F(Reliability, HostileProbesFilesAreRefusedByReport) {
  std::vector<Mutation> m = FileMutations();
  auto attr = [](const std::string& name, const std::string& v) {
    return [name, v](const std::string& p) { SetStringAttr(p, "/", name, v); };
  };
  m.push_back(
      {"alpha of the wrong shape", [](const std::string& p) {
         h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
         std::vector<double> a(1, 1.0);
         f.CreateDataset<double>("alpha/xty/ridge/model", {1, 1, 1, 1}).Write(a.data(), a.size());
       }});
  m.push_back({"alpha of rank 2", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 std::vector<double> a(4, 1.0);
                 f.CreateDataset<double>("alpha/xty/ridge/model", {2, 2}).Write(a.data(), a.size());
               }});
  m.push_back({"NaN R2", [](const std::string& p) {
                 const auto dims =
                     h5::File::Open(p).OpenDataset("metrics/xty/ridge/model/r2").dims();
                 ReplaceDataset(p, "metrics/xty/ridge/model/r2", dims, NAN);
               }});
  m.push_back({"misshapen metric", [](const std::string& p) {
                 ReplaceDataset(p, "metrics/xty/ridge/model/r2", {1, 1, 1}, 0.5);
               }});
  m.push_back({"layer listed twice", attr("layers", "[0,0,1]")});
  m.push_back({"k beyond n", attr("ks", "[2,99]")});
  m.push_back({"ks a float list", attr("ks", "[2.5,5]")});
  m.push_back({"sources without model", attr("sources", "[\"x\"]")});
  m.push_back({"seeds 0", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("seeds", std::int64_t(0));
               }});
  m.push_back({"seeds 2^40", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("seeds", std::int64_t(1) << 40);
               }});
  m.push_back({"unknown probe family", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 H5Lmove(f.id(), "metrics/xty/ridge", f.id(), "metrics/xty/zzz", H5P_DEFAULT,
                         H5P_DEFAULT);
               }});
  // The per-prompt errors the intervals resample.
  for (const auto& [what, value] :
       std::vector<std::pair<std::string, double>>{{"NaN", NAN}, {"negative", -1.0}}) {
    m.push_back({what + " per-prompt error", [value = value](const std::string& p) {
                   const auto dims =
                       h5::File::Open(p).OpenDataset("errors/xty/ridge/model/sse").dims();
                   ReplaceDataset(p, "errors/xty/ridge/model/sse", dims, value);
                 }});
  }
  m.push_back({"per-prompt errors of the wrong shape", [](const std::string& p) {
                 ReplaceDataset(p, "errors/xty/ridge/model/sse", {1, 1, 1, 3}, 0.5);
               }});
  m.push_back({"zero test variance", [](const std::string& p) {
                 const auto dims = h5::File::Open(p).OpenDataset("errors/xty/sst").dims();
                 ReplaceDataset(p, "errors/xty/sst", dims, 0.0);
               }});
  // A target's ceiling: an R2 above 1, or of the wrong shape, or of no target.
  m.push_back({"ceiling above 1", [](const std::string& p) {
                 const auto ks = h5::File::Open(p).OpenDataset("metrics/xty/ridge/model/r2").dims();
                 ReplaceDataset(p, "ceilings/xty", {ks[1], ks[2]}, 1.5);
               }});
  m.push_back({"ceiling of the wrong shape", [](const std::string& p) {
                 ReplaceDataset(p, "ceilings/xty", {7, 7}, 0.5);
               }});
  m.push_back({"ceiling of no target", [](const std::string& p) {
                 ReplaceDataset(p, "ceilings/zz", {1, 1}, 0.5);
               }});
  // Codelengths and target maps: non-finite bits, shapes the layout does not give,
  // a schedule that does not increase, a map R2 above 1.
  m.push_back({"NaN codelength", [](const std::string& p) {
                 const auto dims =
                     h5::File::Open(p).OpenDataset("codelength/xty/ridge/model/bits").dims();
                 ReplaceDataset(p, "codelength/xty/ridge/model/bits", dims, NAN);
               }});
  m.push_back({"codelength of the wrong shape", [](const std::string& p) {
                 ReplaceDataset(p, "codelength/xty/ridge/model/block_bits", {1, 1, 1, 2}, 1.0);
               }});
  m.push_back({"codelength of no target", [](const std::string& p) {
                 ReplaceDataset(p, "codelength/zz/ridge/model/bits", {1, 1, 1}, 1.0);
               }});
  m.push_back({"codelength schedule not increasing", [](const std::string& p) {
                 SetStringAttr(p, "/codelength", "fractions", "[0.5,0.1,1]");
               }});
  m.push_back({"target map above 1", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 h5::Dataset d = f.OpenDataset("target_maps/r2");
                 std::vector<double> v(d.ReadAll<double>().size(), 1.5);
                 d.Write(v.data(), v.size());
               }});
  m.push_back(
      {"target map naming no target", [](const std::string& p) {
         h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
         f.OpenDataset("target_maps/r2").SetAttr("targets", std::vector<std::string>{"xty", "zz"});
       }});
  m.push_back({"bootstrap replicates 2^40", [](const std::string& p) {
                 h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
                 f.SetAttr("bootstrap_replicates", std::int64_t(1) << 40);
               }});
  ExpectEveryMutationRefused(In("probes.h5"), m, "report --probes {} --plot-dir {out}");
}

TEST_F(Reliability, DivergingGradientProbeIsAnErrorNotACrash) {
  TempDir tmp;
  const auto r = RunIclprobe("probe -a " + In("acts.h5") +
                             " --targets xty --probes linear --k 2 --layers 1 --lr 1e30 --epochs 2 "
                             "--threads 1 --quiet --out " +
                             (tmp / "p.h5"));
  ExpectRefused(r, "lr 1e30", "never finite");
  EXPECT_FALSE(fs::exists(tmp / "p.h5"));
}

TEST_F(Reliability, CompareTakesTheSameCheckpointOnceAndDistinguishesEqualStems) {
  TempDir tmp;
  ExpectRefused(RunIclprobe("compare -c " + In("init.h5") + " -c " + In("init.h5") +
                            " --prompts 10 --ilwd-prompts 2 --learners ols --quiet"),
                "same checkpoint twice", "given twice");
  fs::create_directories(tmp / "a");
  fs::create_directories(tmp / "b");
  fs::copy_file(In("init.h5"), tmp / "a/m.h5");
  fs::copy_file(In("run.h5"), tmp / "b/m.h5");
  const auto r = RunIclprobe("compare -c " + (tmp / "a/m.h5") + " -c " + (tmp / "b/m.h5") +
                             " --prompts 10 --ilwd-prompts 2 --learners ols,zero --quiet --csv " +
                             (tmp / "c.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = test::ReadFile(tmp / "c.csv");
  EXPECT_NE(csv.find(tmp / "a/m.h5"), std::string::npos);
  EXPECT_NE(csv.find(tmp / "b/m.h5"), std::string::npos);
}

TEST_F(Reliability, ImpossibleRequestsAreRefusedBeforeWork) {
  TempDir tmp;
  const auto huge = RunIclprobe("extract -c " + In("init.h5") +
                                " --prompts 2147483648 --quiet --out " + (tmp / "a.h5"));
  ExpectRefused(huge, "2^31 prompts", "free");
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  for (const std::string& cmd : std::vector<std::string>{
           "extract -c " + In("init.h5") + " --out " + (tmp / "x.h5"),
           "probe -a " + In("acts.h5") + " --out " + (tmp / "x.h5"),
           "train " + kTiny + "--steps 1 --out " + (tmp / "x.h5"), "baselines --prompts 5",
           "compare -c " + In("init.h5") + " --prompts 5"})
    ExpectRefused(RunIclprobe(cmd + " --threads 2147483647"), cmd, "--threads");
  ExpectRefused(RunIclprobe("baselines --prompts 5 stray"), "stray positional");
  ExpectRefused(RunIclprobe("report --probes " + In("probes.h5") + " --margin nan"), "margin nan",
                "--margin");
  ExpectRefused(RunIclprobe("report --probes " + In("probes.h5") + " --relative -1"), "relative -1",
                "--relative");
  ExpectRefused(
      RunIclprobe("probe -a " + In("acts.h5") + " --lambdas 1:2:100000000 --out " + (tmp / "p.h5")),
      "absurd lambda count", "--lambdas");
  ExpectRefused(
      RunIclprobe("probe -a " + In("acts.h5") + " --split inf,1,1 --out " + (tmp / "p.h5")),
      "inf split", "--split");
  ExpectRefused(RunIclprobe("train " + kTiny + "--hidden 100000 --out " + (tmp / "t.h5")),
                "huge model", "hidden");
  // Output folders that cannot take the output are found before the work.
  ExpectRefused(RunIclprobe("extract -c " + In("init.h5") + " --quiet --out /proc/none/a.h5"),
                "missing folder", "does not exist");
  ExpectRefused(RunIclprobe("extract -c " + In("init.h5") + " --quiet --out /proc/self/a.h5"),
                "unwritable folder", "/proc/self");
  // A FIFO as an input is refused, not read forever.
  const std::string fifo = tmp / "fifo.h5";
  ::mkfifo(fifo.c_str(), 0644);
  for (const std::string& cmd : std::vector<std::string>{
           "inspect " + fifo, "extract -c " + fifo + " --out " + (tmp / "y.h5"),
           "probe -a " + fifo + " --out " + (tmp / "y.h5"), "report --probes " + fifo,
           "baselines --checkpoint " + fifo})
    ExpectRefused(RunShell("timeout 30 '" + test::IclprobeBin() + "' " + cmd), cmd,
                  "not a regular file");
}

TEST_F(Reliability, MessagesNameTheFileAndWhatWasExpected) {
  TempDir tmp;
  const std::string run = Copy(tmp, "run.h5");
  fs::copy_file(In("run.train.csv"), tmp / "run.train.csv");
  { std::ofstream(tmp / "run.train.csv", std::ios::app) << "garbage,line\n"; }
  ExpectRefused(RunIclprobe("train --resume --quiet --threads 1 --out " + run), "garbage log",
                "run.train.csv' line");
  const std::string trunc = Copy(tmp, "init.h5");
  Truncate(trunc, 0.5);
  ExpectRefused(RunIclprobe("inspect " + trunc), "truncated", "truncated");
  const std::string bad = Copy(tmp, "acts.h5");
  SetStringAttr(bad, "/", "model_config", "{\"d\":");
  ExpectRefused(RunIclprobe("probe -a " + bad + " --out " + (tmp / "p.h5")), "bad JSON",
                "model_config");
}

// ---- A full disk never leaves a finished-looking file -----------------------------------

TEST_F(Reliability, FullDiskDuringExtractLeavesNoFileAndResumeEqualsAnUninterruptedRun) {
  TempDir tmp;
  const std::string common = "'" + test::IclprobeBin() + "' extract -c " + In("init.h5") +
                             " --prompts 2000 --batch 32 --threads 1 --quiet --out ";
  ASSERT_EQ(RunShell(common + (tmp / "full.h5")).exit_code, 0);
  // About 3 kB per prompt (6.5 MB in all): a 3 MB limit stops it part way.
  const auto r = RunShellWithFileLimit(common + (tmp / "cut.h5"), 3 << 20);
  ExpectRefused(r, "extract under a 3 MB limit");
  EXPECT_GT(h5::File::Open(tmp / "cut.h5.partial").GetInt("n_complete"), 0);
  EXPECT_FALSE(fs::exists(tmp / "cut.h5"));
  ASSERT_TRUE(fs::exists(tmp / "cut.h5.partial"));
  ASSERT_EQ(RunShell(common + (tmp / "cut.h5") + " --resume").exit_code, 0);
  const h5::File a = h5::File::Open(tmp / "full.h5"), b = h5::File::Open(tmp / "cut.h5");
  for (const std::string& name : std::vector<std::string>{
           "hidden/layer_00", "hidden/layer_01", "hidden/layer_02", "predictions", "prompts/x",
           "targets/w_ols", "targets/xty", "targets/xtx"}) {
    const auto va = a.OpenDataset(name).ReadAll<double>(),
               vb = b.OpenDataset(name).ReadAll<double>();
    EXPECT_TRUE(va == vb) << name;  // the same computation on one thread: exact
  }
}

TEST_F(Reliability, FullDiskDuringTrainingKeepsTheLastGoodCheckpointAndResumesExactly) {
  TempDir tmp;
  const std::string train = "'" + test::IclprobeBin() + "' train " + kTiny +
                            "--steps 30 --batch 8 --eval-every 10 --save-every 10 "
                            "--eval-prompts 16 --threads 1 --quiet ";
  ASSERT_EQ(RunShell(train + "--out " + (tmp / "whole.h5")).exit_code, 0);
  // No room for even the first checkpoint: exit 2 and no checkpoint at all.
  ExpectRefused(RunShellWithFileLimit(train + "--out " + (tmp / "none.h5"), 20000), "first save");
  EXPECT_FALSE(fs::exists(tmp / "none.h5"));
  EXPECT_FALSE(fs::exists(tmp / "none.h5.partial"));
  // A good checkpoint at step 10, then the disk fills at the next save.
  ASSERT_EQ(RunShell(train + "--stop-after-steps 10 --out " + (tmp / "cut.h5")).exit_code, 0);
  const auto failed = RunShellWithFileLimit(
      "'" + test::IclprobeBin() + "' train --resume --threads 1 --quiet --out " + (tmp / "cut.h5"),
      20000);
  ExpectRefused(failed, "second save", "last good checkpoint (step 10)");
  const auto inspect = RunIclprobe("inspect " + (tmp / "cut.h5"));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("step         10 of 30"), std::string::npos) << inspect.out;
  ASSERT_EQ(RunShell("'" + test::IclprobeBin() + "' train --resume --threads 1 --quiet --out " +
                     (tmp / "cut.h5"))
                .exit_code,
            0);
  const h5::File a = h5::File::Open(tmp / "whole.h5"), b = h5::File::Open(tmp / "cut.h5");
  for (const auto& name : a.OpenGroup("params").Members())
    EXPECT_TRUE(a.OpenDataset("params/" + name).ReadAll<float>() ==
                b.OpenDataset("params/" + name).ReadAll<float>())
        << name;  // resume is exact: same batches, one thread, same kernels
  EXPECT_EQ(test::ReadFile(tmp / "whole.train.csv"), test::ReadFile(tmp / "cut.train.csv"));
}

TEST_F(Reliability, FullDiskLeavesNoOutputFromAnyOtherWriter) {
  TempDir tmp;
  const std::string bin = "'" + test::IclprobeBin() + "' ";
  struct Case {
    std::string name, command;
    long limit;
    std::vector<std::string> outputs;
  };
  const std::string plots = tmp / "plots";
  fs::create_directories(plots);
  const std::vector<Case> cases = {
      {"inspect --export",
       "inspect " + In("run.h5") + " --export " + (tmp / "e.h5"),
       20000,
       {tmp / "e.h5", tmp / "e.h5.partial"}},
      {"probe",
       "probe -a " + In("acts.h5") + " --probes ridge --k 2,5 --quiet --threads 1 --out " +
           (tmp / "p.h5") + " --csv " + (tmp / "p.csv"),
       4000,
       {tmp / "p.h5", tmp / "p.csv", tmp / "p.h5.partial", tmp / "p.csv.partial"}},
      {"report --out",
       "report --probes " + In("probes.h5") + " --out " + (tmp / "t.md"),
       200,
       {tmp / "t.md", tmp / "t.md.partial"}},
      {"report --plot-dir",
       "report --probes " + In("probes.h5") + " --plot-dir " + plots,
       3000,
       {plots + "/xty_r2_by_layer.png", plots + "/plots.gp"}},
      {"baselines --csv",
       "baselines --prompts 50 --learners ols --csv " + (tmp / "b.csv"),
       300,
       {tmp / "b.csv", tmp / "b.csv.partial"}},
      {"compare --csv",
       "compare -c " + In("init.h5") +
           " --prompts 20 --ilwd-prompts 2 --learners ols --quiet --csv " + (tmp / "c.csv"),
       300,
       {tmp / "c.csv", tmp / "c.linearity.csv", tmp / "c.paired.csv"}},
      {"construct",
       "construct --program newton:2:0.05:0.25 --rotate 1 --d 2 --n 3 --out " + (tmp / "k.h5"),
       20000,
       {tmp / "k.h5", tmp / "k.h5.partial"}},
  };
  for (const auto& c : cases) {
    ExpectRefused(RunShellWithFileLimit(bin + c.command, c.limit), c.name);
    for (const auto& o : c.outputs)
      EXPECT_FALSE(fs::exists(o)) << c.name << ": " << o;
  }
  EXPECT_TRUE(fs::is_empty(plots));  // no scratch folder left either
}

// ---- --force never destroys an input; two runs never share an output --------------------

TEST_F(Reliability, ForceNeverReplacesAnInput) {
  TempDir tmp;
  const std::string ck = Copy(tmp, "init.h5"), run = Copy(tmp, "run.h5"),
                    acts = Copy(tmp, "acts.h5"), probes = Copy(tmp, "probes.h5");
  fs::create_symlink(ck, tmp / "link.h5");
  const std::string before_ck = Bytes(ck), before_run = Bytes(run), before_acts = Bytes(acts),
                    before_probes = Bytes(probes);
  const std::vector<std::string> commands = {
      "extract -c " + ck + " --prompts 10 --quiet --force --out " + ck,
      "extract -c " + ck + " --prompts 10 --quiet --force --out " + (tmp / "link.h5"),
      "probe -a " + acts + " --k 2 --quiet --force --out " + acts,
      "probe -a " + acts + " --k 2 --quiet --force --out " + (tmp / "p.h5") + " --csv " + acts,
      "inspect " + run + " --force --export " + run,
      "report --probes " + probes + " --force --out " + probes,
      "baselines --checkpoint " + ck + " --prompts 5 --force --csv " + ck,
      "compare -c " + ck + " --prompts 5 --ilwd-prompts 1 --quiet --force --csv " + ck,
  };
  for (const auto& c : commands)
    ExpectRefused(RunIclprobe(c), c, "input");
  EXPECT_EQ(Bytes(ck), before_ck);
  EXPECT_EQ(Bytes(run), before_run);
  EXPECT_EQ(Bytes(acts), before_acts);
  EXPECT_EQ(Bytes(probes), before_probes);
  // Two outputs of one run on one path.
  ExpectRefused(RunIclprobe("probe -a " + acts + " --k 2 --quiet --out " + (tmp / "x") + " --csv " +
                            (tmp / "x")),
                "--out = --csv", "same file");
  EXPECT_FALSE(fs::exists(tmp / "x"));
}

TEST_F(Reliability, ForceNeverReplacesAFifoOrDevice) {
  TempDir tmp;
  const std::string fifo = tmp / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& c : std::vector<std::string>{
           "extract -c " + In("init.h5") + " --prompts 10 --quiet --force --out " + fifo,
           "train " + kTiny + "--init-only --force --out " + fifo,
           "probe -a " + In("acts.h5") + " --k 2 --quiet --force --out " + fifo,
           "baselines --prompts 5 --force --csv " + fifo,
           "inspect " + In("init.h5") + " --force --export " + fifo,
           "report --probes " + In("probes.h5") + " --force --out " + fifo,
           "construct --program gd:2 --d 2 --n 3 --force --out " + fifo}) {
    ExpectRefused(RunShell("timeout 60 '" + test::IclprobeBin() + "' " + c), c, "regular file");
    struct stat st;
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << c;
  }
}

TEST_F(Reliability, ASecondWriterOfAnOutputIsRefused) {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> writers = {
      {tmp / "e.h5",
       "extract -c " + In("init.h5") + " --prompts 10 --quiet --out " + (tmp / "e.h5")},
      {tmp / "t.h5",
       "train " + kTiny + "--steps 2 --batch 4 --eval-prompts 8 --quiet --out " + (tmp / "t.h5")},
      {tmp / "p.h5", "probe -a " + In("acts.h5") + " --k 2 --quiet --out " + (tmp / "p.h5")},
      {tmp / "x.h5", "inspect " + In("init.h5") + " --export " + (tmp / "x.h5")},
      {tmp / "r.md", "report --probes " + In("probes.h5") + " --out " + (tmp / "r.md")},
      {tmp / "b.csv", "baselines --prompts 5 --csv " + (tmp / "b.csv")},
      {tmp / "k.h5", "construct --program newton:2:0.05 --d 2 --n 3 --out " + (tmp / "k.h5")},
  };
  for (const auto& [out, cmd] : writers) {
    HeldLock lock(out);
    ExpectRefused(RunIclprobe(cmd), cmd, "another process");
    EXPECT_FALSE(fs::exists(out)) << cmd;
  }
}

// The lock comes before anything touches an output's names: a second writer leaves the first
// one's partial file alone (inspect --export and import used to check the output without the
// lock and remove "<out>.partial" on the way out, deleting the other run's work).
TEST_F(Reliability, ASecondWriterNeverTouchesTheFirstOnesPartialFile) {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> writers = {
      {tmp / "x.h5", "inspect " + In("init.h5") + " --export " + (tmp / "x.h5")},
      {tmp / "i.h5", "import --format garg " + std::string(ICL_FIXTURES) +
                         "/garg/model.safetensors --heads 2 --out " + (tmp / "i.h5")},
      {tmp / "e.h5",
       "extract -c " + In("init.h5") + " --prompts 10 --quiet --out " + (tmp / "e.h5")},
      {tmp / "p.h5", "probe -a " + In("acts.h5") + " --k 2 --quiet --out " + (tmp / "p.h5")},
      {tmp / "c.h5", "construct --program gd --d 3 --n 5 --out " + (tmp / "c.h5")},
  };
  for (const auto& [out, cmd] : writers) {
    HeldLock lock(out);
    { std::ofstream(out + ".partial") << "the first writer's work"; }
    ExpectRefused(RunIclprobe(cmd), cmd, "another process");
    EXPECT_EQ(test::ReadFile(out + ".partial"), "the first writer's work") << cmd;
    EXPECT_FALSE(fs::exists(out)) << cmd;
  }
  // Both at once, as the campaign ran them: one succeeds, the other is refused, and the output
  // is there every time.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string out = tmp / ("race" + std::to_string(attempt) + ".h5");
    const std::string one =
        "'" + test::IclprobeBin() + "' inspect " + In("init.h5") + " --export " + out;
    const auto r = RunShell("(" + one + " >/dev/null 2>&1; echo $?) & (" + one +
                            " >/dev/null 2>&1; echo $?) & wait");
    EXPECT_TRUE(r.out == "0\n2\n" || r.out == "2\n0\n" || r.out == "0\n0\n") << r.out;
    EXPECT_TRUE(fs::exists(out)) << attempt;
  }
}

TEST_F(Reliability, TwoExtractsToOneOutputNeverInterleave) {
  TempDir tmp;
  const std::string out = tmp / "a.h5";
  const std::string cmd = "'" + test::IclprobeBin() + "' extract -c " + In("init.h5") +
                          " --prompts 30000 --batch 32 --threads 1 --quiet --force --out " + out;
  // The first run in the background; the second starts once the first holds the lock.
  const std::string first_rc = tmp / "first.rc";
  ASSERT_EQ(
      RunShell("(" + cmd + " --seed 1; echo $? > " + first_rc + ") >/dev/null 2>&1 &").exit_code,
      0);
  for (int i = 0; i < 400 && !fs::exists(out + ".lock"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(fs::exists(out + ".lock"));
  ExpectRefused(RunShell(cmd + " --seed 2"), "second writer", "another process");
  for (int i = 0; i < 2400 && !fs::exists(first_rc); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(test::ReadFile(first_rc), "0\n");
  const h5::File f = h5::File::Open(out);
  EXPECT_EQ(f.GetInt("seed"), 1);
  EXPECT_EQ(f.GetInt("n_complete"), 30000);
  EXPECT_FALSE(fs::exists(out + ".lock"));
}

TEST_F(Reliability, TrainRefusesToOverwriteItsLogWithoutForce) {
  TempDir tmp;
  { std::ofstream(tmp / "m.train.csv") << "mine\n"; }
  ExpectRefused(
      RunIclprobe("train " + kTiny + "--steps 2 --batch 4 --quiet --out " + (tmp / "m.h5")),
      "existing log", "m.train.csv");
  EXPECT_EQ(test::ReadFile(tmp / "m.train.csv"), "mine\n");
}

// A run killed before its first checkpoint leaves its log (header, maybe an evaluation at step
// 0) and no checkpoint: --resume has nothing to continue, so a plain re-run of the same command
// takes the name back. A log that is not a training log is still the user's file.
TEST_F(Reliability, ALogWithoutItsCheckpointIsTheLeftoverOfAKilledRun) {
  TempDir tmp;
  const std::string run = "train " + kTiny + "--steps 4 --batch 4 --eval-every 2 --save-every 2 " +
                          "--eval-prompts 8 --threads 1 --quiet --out " + (tmp / "t.h5");
  for (const std::string& leftover :
       {std::string("step,lr,train_loss,eval_loss,k,model_error,ols_error\n"),
        std::string("step,lr,train_loss,eval_loss,k,model_error,ols_error\n0,0,1,1,0,1,1\n")}) {
    { std::ofstream(tmp / "t.train.csv") << leftover; }
    const auto r = RunIclprobe(run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(tmp / "t.h5"));
    // The log is the new run's: its evaluations at steps 2 and 4, none of the leftover's rows.
    const std::string log = test::ReadFile(tmp / "t.train.csv");
    EXPECT_EQ(log.find("0,0,1,1,0,1,1\n"), std::string::npos) << log;
    EXPECT_NE(log.find("\n4,"), std::string::npos) << log;
    fs::remove(tmp / "t.h5");
  }
  // With the checkpoint there, the log is the run's own: refused without --force or --resume.
  ASSERT_EQ(RunIclprobe(run).exit_code, 0);
  ExpectRefused(RunIclprobe(run), "checkpoint and log exist", "--resume");
}

// ---- Files that point elsewhere ------------------------------------------------

namespace {

// Ways a dataset can make HDF5 read bytes that are not in the file iclprobe was given, and a
// filter iclprobe never writes. Every reader refuses each of them, naming the dataset.
enum class Elsewhere {
  kExternalStorage,  // raw data in another file (H5Pset_external), with the right values
  kExternalFifo,     // raw data "in" a FIFO: a reader that followed it would block forever
  kExternalLink,     // the name is a link into another HDF5 file
  kSoftLink,         // the name is a soft link (iclprobe writes only hard links)
  kVirtual,          // a virtual dataset mapping another file's dataset
  kForeignFilter,    // chunked with Fletcher-32, a filter iclprobe does not write
};

// Replaces dataset `object` of `file` by one of the same shape, element size and values whose
// bytes are reached as `how` says.
void StoreElsewhere(const std::string& file, const std::string& object, Elsewhere how) {
  h5::Dims dims;
  std::vector<double> values;
  std::size_t element = 0;
  {
    h5::File f = h5::File::Open(file);
    const h5::Dataset ds = f.OpenDataset(object);
    dims = ds.dims();
    element = ds.ElementSize();
    values = ds.ReadAll<double>();
  }
  ASSERT_TRUE(element == 4 || element == 8) << object;
  const hid_t type = element == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
  std::vector<float> as_float(values.begin(), values.end());
  const void* bytes = element == 4 ? static_cast<const void*>(as_float.data())
                                   : static_cast<const void*>(values.data());
  const hsize_t n_bytes = values.size() * element;
  const std::string side = file + ".side";
  auto side_h5 = [&] {  // another HDF5 file holding the same values as "/x"
    h5::File s = h5::File::Create(side, /*truncate=*/true);
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t d = H5Dcreate2(s.id(), "/x", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes), 0);
    H5Dclose(d);
    H5Sclose(space);
    s.Close();
  };
  DeleteLink(file, object);
  h5::File f = h5::File::Open(file, h5::File::Mode::kReadWrite);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  bool write = false;
  switch (how) {
    case Elsewhere::kExternalStorage: {
      std::ofstream(side, std::ios::binary)
          .write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n_bytes));
      ASSERT_GE(H5Pset_external(dcpl, side.c_str(), 0, n_bytes), 0);
      break;
    }
    case Elsewhere::kExternalFifo:
      ASSERT_EQ(::mkfifo(side.c_str(), 0644), 0);
      ASSERT_GE(H5Pset_external(dcpl, side.c_str(), 0, n_bytes), 0);
      break;
    case Elsewhere::kExternalLink:
      side_h5();
      ASSERT_GE(
          H5Lcreate_external(side.c_str(), "/x", f.id(), object.c_str(), H5P_DEFAULT, H5P_DEFAULT),
          0);
      break;
    case Elsewhere::kSoftLink: {
      const hid_t d =
          H5Dcreate2(f.id(), "/elsewhere", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes), 0);
      H5Dclose(d);
      ASSERT_GE(H5Lcreate_soft("/elsewhere", f.id(), object.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0);
      break;
    }
    case Elsewhere::kVirtual: {
      side_h5();
      ASSERT_GE(H5Pset_virtual(dcpl, space, side.c_str(), "/x", space), 0);
      break;
    }
    case Elsewhere::kForeignFilter:
      ASSERT_GE(H5Pset_chunk(dcpl, static_cast<int>(dims.size()), dims.data()), 0);
      ASSERT_GE(H5Pset_fletcher32(dcpl), 0);
      write = true;
      break;
  }
  if (how != Elsewhere::kExternalLink && how != Elsewhere::kSoftLink) {
    const hid_t d = H5Dcreate2(f.id(), object.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0) << object;
    if (write) {
      ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes), 0);
    }
    H5Dclose(d);
  }
  H5Pclose(dcpl);
  H5Sclose(space);
  f.Close();
}

std::vector<Mutation> StorageMutations(const std::string& object) {
  const std::vector<std::pair<std::string, Elsewhere>> ways = {
      {"external storage", Elsewhere::kExternalStorage},
      {"external storage in a FIFO", Elsewhere::kExternalFifo},
      {"external link", Elsewhere::kExternalLink},
      {"soft link", Elsewhere::kSoftLink},
      {"virtual dataset", Elsewhere::kVirtual},
      {"Fletcher-32 filter", Elsewhere::kForeignFilter},
  };
  std::vector<Mutation> m;
  for (const auto& [name, how] : ways)
    m.push_back({object + " as " + name, [object = object, how = how](const std::string& p) {
                   StoreElsewhere(p, object, how);
                 }});
  return m;
}

}  // namespace

// The values are right in every case: what is refused is where they are kept. A reader that
// followed the FIFO would hang (timeout: exit 124); one that read the external bytes would
// exit 0 (inspect --export would copy another file's bytes into its output).
TEST_F(Reliability, DatasetsStoredOutsideTheFileAreRefusedByEveryReader) {
  const auto ckpt = StorageMutations("/params/readout.weight");
  for (const char* command :
       {"inspect {} --export {out}", "extract -c {} --prompts 10 --threads 1 --quiet --out {out}",
        "baselines --checkpoint {} --prompts 10 --learners ols --csv {out}",
        "compare -c {} --prompts 10 --ilwd-prompts 2 --learners ols --quiet --csv {out}"})
    ExpectEveryMutationRefused(In("init.h5"), ckpt, command);
  ExpectEveryMutationRefused(In("run.h5"), StorageMutations("/params/readout.weight"),
                             "train --resume --quiet --threads 1 --out {}");
  ExpectEveryMutationRefused(In("init.h5"), ckpt,
                             "intervene -c {} --probes " + In("probes.h5") +
                                 " --target xty --layers 1 --k 3 --pairs 20 --threads 1 --quiet "
                                 "--out {out}");
  ExpectEveryMutationRefused(In("acts.h5"), StorageMutations("/hidden/layer_01"),
                             "probe -a {} --targets xty --probes ridge --k 2 --quiet --out {out}");
  ExpectEveryMutationRefused(In("probes.h5"), StorageMutations("/metrics/xty/ridge/model/r2"),
                             "report --probes {} --plot-dir {out}");
}

TEST_F(Reliability, RefusalsOfStorageNameTheDataset) {
  TempDir tmp;
  const std::string ckpt = Copy(tmp, "init.h5");
  StoreElsewhere(ckpt, "/params/readout.weight", Elsewhere::kExternalStorage);
  ExpectRefused(RunIclprobe("inspect " + ckpt + " --export " + (tmp / "e.h5")), "external",
                "dataset '/params/readout.weight' keeps its data in another file");
  EXPECT_FALSE(fs::exists(tmp / "e.h5"));
}

// ---- Thread counts that stall ---------------------------------------------------

namespace {

// The worker count a run reports when it cuts --threads ("running N workers"), or -1.
int ReportedWorkers(const std::string& err) {
  const auto at = err.find("running ");
  if (at == std::string::npos) return -1;
  return std::atoi(err.c_str() + at + 8);
}

int CoresOfThisProcess() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

}  // namespace

// The documented maximum, with every core busy: the run starts no more workers than it has
// cores, says so, and finishes (the timeout only tells a stall from a result; it asserts no
// speed). Two busy loops, bounded in time, stand for another job on the machine.
TEST_F(Reliability, TheDocumentedMaximumThreadCountStartsNoMoreWorkersThanCores) {
  const int cores = CoresOfThisProcess();
  const std::string load = "for i in $(seq " + std::to_string(cores) +
                           "); do timeout 120 sh -c 'while :; do :; done' & done; ";
  for (const std::string& cmd :
       {"baselines --checkpoint " + In("init.h5") + " --prompts 200 --learners ols,gd:0.1",
        "intervene -c " + In("init.h5") + " --probes " + In("probes.h5") +
            " --target xty --layers 1 --k 3 --pairs 50 --quiet --out {out}"}) {
    TempDir tmp;
    std::string c = cmd;
    if (c.find("{out}") != std::string::npos) c.replace(c.find("{out}"), 5, tmp / "iv.h5");
    const auto r = RunShell(load + "timeout 300 '" + test::IclprobeBin() + "' " + c +
                            " --threads 256; rc=$?; kill $(jobs -p) 2>/dev/null; exit $rc");
    EXPECT_EQ(r.exit_code, 0) << c << "\n" << r.err;
    const int workers = ReportedWorkers(r.err);
    EXPECT_GE(workers, 1) << r.err;
    EXPECT_LE(workers, cores) << r.err;
  }
}

// ---- Resumes check what they continue ------------------------------------------

namespace {

std::string Compat(const std::string& name) {
  return std::string(ICL_FIXTURES) + "/compat/" + name;
}

// A copy of the earlier binary's partial activations file, under the name extract resumes, with
// the checkpoint it came from.
struct PartialCopy {
  TempDir tmp;
  std::string ckpt = tmp / "init.h5", out = tmp / "acts.h5", partial = out + ".partial";
  PartialCopy() {
    fs::copy_file(Compat("init.h5"), ckpt);
    fs::copy_file(Compat("acts_partial.h5"), partial);
  }
  std::string Resume() const {
    return "extract -c " + ckpt + " --prompts 1000 --batch 64 --threads 1 --quiet --resume --out " +
           out;
  }
};

std::vector<std::string> DatasetBytes(const std::string& file,
                                      const std::vector<std::string>& names) {
  std::vector<std::string> out;
  const h5::File f = h5::File::Open(file);
  for (const auto& n : names) {
    const auto v = f.OpenDataset(n).ReadAll<double>();
    out.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  return out;
}

}  // namespace

// Made by the binary of commit 32f9ebb (tests/fixtures/compat/README.md): the new checks pass
// them, and their resumes equal uninterrupted runs of today's binary, bit for bit. Bit for bit
// holds only on the OpenBLAS kernels that made the fixtures (SkylakeX, which the test programs
// pick on any AVX-512 CPU: test_main.cpp): other kernels sum the GEMMs in another order, so the
// first part (the fixture's) and the rest (today's run) round differently. Elsewhere the files
// must still load and resume; the bit-for-bit comparisons are skipped, saying so.
TEST(ReliabilityCompat, FilesOfTheEarlierBinaryResumeBitExactly) {
  const bool fixture_kernels = core::BlasCoreName() == "SkylakeX";
  {
    PartialCopy p;
    const auto r = RunIclprobe(p.Resume());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(h5::File::Open(p.out).GetInt("n_complete"), 1000);
    const std::string fresh = p.tmp / "fresh.h5";
    ASSERT_EQ(RunIclprobe("extract -c " + p.ckpt +
                          " --prompts 1000 --batch 64 --threads 1 --quiet --out " + fresh)
                  .exit_code,
              0);
    if (fixture_kernels) {
      EXPECT_EQ(h5::File::Open(p.out).GetString("content_sha256"),
                h5::File::Open(fresh).GetString("content_sha256"));
    }
  }
  TempDir tmp;
  const std::string run = tmp / "run.h5", fresh = tmp / "fresh.h5";
  fs::copy_file(Compat("run.h5"), run);
  fs::copy_file(Compat("run.train.csv"), tmp / "run.train.csv");
  const auto r = RunIclprobe("train --resume --threads 1 --quiet --out " + run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The earlier binary computed with LibTorch's operators throughout: its file has no
  // `kernels`, resumes as kernels 1, and equals a fresh run of kernels 1.
  ASSERT_EQ(RunIclprobe("train --d 3 --n 5 --layers 2 --hidden 16 --heads 2 --steps 20 --batch 8 "
                        "--eval-every 5 --save-every 5 --eval-prompts 16 --seed 3 --threads 1 "
                        "--kernels 1 --quiet --out " +
                        fresh)
                .exit_code,
            0);
  if (!fixture_kernels)
    GTEST_SKIP() << "OpenBLAS runs " << core::BlasCoreName()
                 << " kernels, the fixtures were made with SkylakeX: they loaded and resumed, "
                    "the bit-for-bit comparisons need the fixtures' kernels";
  const std::vector<std::string> params = {"/params/readout.weight", "/params/blocks.1.fc2.bias",
                                           "/params/blocks.0.attn.in_proj_weight"};
  EXPECT_EQ(DatasetBytes(run, params), DatasetBytes(fresh, params));
  EXPECT_EQ(test::ReadFile(tmp / "run.train.csv"), test::ReadFile(tmp / "fresh.train.csv"));
}

TEST(ReliabilityCompat, CraftedPartialsAreRefusedBeforeTheyAreContinued) {
  auto set_int = [](const std::string& attr, std::int64_t v) {
    return [attr, v](const std::string& p) {
      h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
      f.SetAttr(attr, v);
    };
  };
  const std::vector<Mutation> crafted = {
      {"n_complete above the rows written", set_int("n_complete", 896)},
      {"n_complete not a whole group", set_int("n_complete", 500)},
      {"a dataset shorter than n_complete",
       [](const std::string& p) {
         h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
         f.OpenDataset("/targets/xty").Resize(100);
       }},
      {"zeroed row digest",
       [](const std::string& p) {
         h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
         std::vector<std::uint8_t> zeros(32, 0);
         f.OpenDataset("/provenance/group_sha256").WriteRows(3, 1, zeros.data(), zeros.size());
       }},
      {"a hidden layer of another dtype",
       [](const std::string& p) {
         const auto dims = h5::File::Open(p).OpenDataset("/hidden/layer_01").dims();
         ReplaceDataset(p, "/hidden/layer_01", dims, 0.5);
       }},
      {"extract_config not JSON",
       [](const std::string& p) { SetStringAttr(p, "/", "extract_config", "{\"prompts\":"); }},
      {"a changed row",
       [](const std::string& p) {
         h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
         std::vector<double> w(3, 7.0);
         f.OpenDataset("/prompts/w").WriteRows(40, 1, w.data(), w.size());
       }},
  };
  for (const auto& m : crafted) {
    PartialCopy p;
    m.apply(p.partial);
    const auto r = RunIclprobe(p.Resume());
    ExpectRefused(r, m.name, "--resume");
    EXPECT_FALSE(fs::exists(p.out)) << m.name;
    EXPECT_TRUE(fs::exists(p.partial)) << m.name << ": a refused resume keeps the partial file";
  }
}

TEST(ReliabilityCompat, CraftedTrainStatesAreRefused) {
  auto ts_int = [](const std::string& object, const std::string& attr, std::int64_t v) {
    return [object, attr, v](const std::string& p) {
      h5::File f = h5::File::Open(p, h5::File::Mode::kReadWrite);
      if (object == "/") {
        f.SetAttr(attr, v);
      } else {
        h5::Group g = f.OpenGroup(object);
        g.SetAttr(attr, v);
      }
    };
  };
  const std::vector<Mutation> crafted = {
      {"optimizer steps 0", ts_int("/train_state", "adam_step", 0)},
      {"optimizer steps 3", ts_int("/train_state", "adam_step", 3)},
      {"optimizer steps 2^62", ts_int("/train_state", "adam_step", std::int64_t(1) << 62)},
      {"root step disagrees", ts_int("/", "step", 5)},
      {"negative second moment",
       [](const std::string& p) {
         const auto dims =
             h5::File::Open(p).OpenDataset("/train_state/exp_avg_sq/readout.bias").dims();
         ReplaceDataset(p, "/train_state/exp_avg_sq/readout.bias", dims, -1.0);
       }},
  };
  for (const auto& m : crafted) {
    TempDir tmp;
    const std::string run = tmp / "run.h5";
    fs::copy_file(Compat("run.h5"), run);
    fs::copy_file(Compat("run.train.csv"), tmp / "run.train.csv");
    m.apply(run);
    ExpectRefused(RunIclprobe("train --resume --threads 1 --quiet --out " + run), m.name);
  }
}

// ---- Silent wrong results -------------------------------------------------------

// A checkpoint between two evaluations (--save-every 7, --eval-every 5) keeps the training loss
// summed since the last evaluation, so the log of a resumed run is the uninterrupted run's, row
// for row (it used to average only the steps after the resume).
TEST_F(Reliability, TheLogOfARunResumedBetweenEvaluationsIsTheUninterruptedOne) {
  TempDir tmp;
  const std::string args = "train " + kTiny +
                           "--steps 20 --batch 8 --eval-every 5 --save-every 7 --eval-prompts 16 "
                           "--seed 4 --threads 1 --quiet --out ";
  ASSERT_EQ(RunIclprobe(args + (tmp / "whole.h5")).exit_code, 0);
  for (const int stop : {7, 8, 13}) {
    const std::string run = tmp / ("cut" + std::to_string(stop) + ".h5");
    ASSERT_EQ(RunIclprobe(args + run + " --stop-after-steps " + std::to_string(stop)).exit_code, 0);
    const auto r = RunIclprobe("train --resume --threads 1 --quiet --out " + run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::ReadFile(fs::path(run).replace_extension(".train.csv")),
              test::ReadFile(tmp / "whole.train.csv"))
        << "stopped after " << stop;
  }
}

// A control is paired with the model by its prompts, not by its seed attribute: one extracted
// on other prompts, with the attribute edited to the main file's seed, is refused.
TEST_F(Reliability, AControlOfOtherPromptsIsRefusedWhateverItsSeedAttributeSays) {
  TempDir tmp;
  const std::string other = tmp / "other.h5";
  ASSERT_EQ(RunIclprobe("extract -c " + In("init.h5") + " --prompts 200 --seed 2 --threads 1 " +
                        "--quiet --out " + other)
                .exit_code,
            0);
  {
    h5::File f = h5::File::Open(other, h5::File::Mode::kReadWrite);
    f.SetAttr("seed", h5::File::Open(In("acts.h5")).GetInt("seed"));
  }
  for (const std::string extra : {"", " --verify-inputs"}) {
    ExpectRefused(
        RunIclprobe("probe -a " + In("acts.h5") + " --control " + other +
                    " --targets xty --probes ridge --k 2 --quiet --out " + (tmp / "p.h5") + extra),
        "relabelled control" + extra, "holds other prompts");
    EXPECT_FALSE(fs::exists(tmp / "p.h5"));
  }
  // The same prompts under another name are accepted.
  const std::string twin = tmp / "twin.h5";
  fs::copy_file(In("acts.h5"), twin);
  const auto ok =
      RunIclprobe("probe -a " + In("acts.h5") + " --control " + twin +
                  " --targets xty --probes ridge --k 2 --quiet --out " + (tmp / "q.h5"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// ---- Messages ---------------------------------------------------------------------

// A library's runtime error that names a setting ({resume}) reaches the user as the option
// (--resume), as InputError's always did: the disk-full message of extract, and probe's of an
// unfinished file.
TEST_F(Reliability, PlaceholdersInEveryMessageAreRenderedAsOptions) {
  TempDir tmp;
  const std::string out = tmp / "a.h5";
  const auto full =
      test::RunShellWithFileLimit("'" + test::IclprobeBin() + "' extract -c " + In("init.h5") +
                                      " --prompts 3000 --batch 64 --threads 1 --quiet --out " + out,
                                  200000);
  ExpectRefused(full, "full disk", "--resume");
  EXPECT_EQ(full.err.find("{resume}"), std::string::npos) << full.err;
  ASSERT_TRUE(fs::exists(out + ".partial"));
  const std::string unfinished = tmp / "unfinished.h5";
  fs::copy_file(out + ".partial", unfinished);
  const auto r = RunIclprobe("probe -a " + unfinished + " --k 2 --quiet --out " + (tmp / "p.h5"));
  ExpectRefused(r, "unfinished", "--resume");
  EXPECT_EQ(r.err.find("{resume}"), std::string::npos) << r.err;
}

// Non-finite outputs are refused before anything is written: a construction whose step size
// overflows float32, and states beyond float16's range stored as float16.
TEST_F(Reliability, NonFiniteOutputsAreRefusedBeforeAnythingIsWritten) {
  TempDir tmp;
  ExpectRefused(
      RunIclprobe("construct --program gd --alpha 1e308 --d 3 --n 5 --out " + (tmp / "inf.h5")),
      "alpha 1e308", "beyond what float32 weights hold");
  EXPECT_FALSE(fs::exists(tmp / "inf.h5"));
  EXPECT_FALSE(fs::exists(tmp / "inf.h5.partial"));
  // 2 alpha X'y with alpha = 1e6 lies far beyond 65504.
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 1e6 --d 3 --n 5 --out " + (tmp / "big.h5"))
                .exit_code,
            0);
  const auto r =
      RunIclprobe("extract -c " + (tmp / "big.h5") +
                  " --prompts 64 --dtype float16 --threads 1 --quiet --out " + (tmp / "a.h5"));
  ExpectRefused(r, "float16 overflow", "beyond float16's largest value");
  EXPECT_FALSE(fs::exists(tmp / "a.h5"));
  // Stored as float32 the same states are fine.
  EXPECT_EQ(RunIclprobe("extract -c " + (tmp / "big.h5") +
                        " --prompts 64 --threads 1 --quiet --out " + (tmp / "b.h5"))
                .exit_code,
            0);
}

// Lists and families that would write a row twice, compare a thing with itself or name a layer
// the model does not have; labels that would break a table; numbers that are not numbers.
TEST_F(Reliability, DuplicatesAndImpossibleEntriesAreRefused) {
  TempDir tmp;
  const std::string link = tmp / "link.h5";
  fs::create_hard_link(In("probes.h5"), link);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"baselines --prompts 5 --learners ols,ols", "listed twice"},
      {"compare -c " + In("init.h5") + " --prompts 10 --learners ols,gd:0.1,ols --quiet",
       "listed twice"},
      {"probe -a " + In("acts.h5") + " --targets w_ols,w_ols --k 2 --quiet --out " + (tmp / "p.h5"),
       "--targets: 'w_ols' is listed twice"},
      {"probe -a " + In("acts.h5") + " --k 2,2 --quiet --out " + (tmp / "p.h5"),
       "--k: '2' is listed twice"},
      {"probe -a " + In("acts.h5") + " --probes linear --k 2 --lr inf --quiet --out " +
           (tmp / "p.h5"),
       "--lr: must be a positive finite number"},
      {"probe -a " + In("acts.h5") + " --k 2 --split 1e308,0.1,0.1 --quiet --out " + (tmp / "p.h5"),
       "--split"},
      {"report --probes " + In("probes.h5") + " --compare-targets w_ols,w_ols", "listed twice"},
      {"report --probes " + In("probes.h5") + " " + In("probes.h5"), "are the same file"},
      {"report --probes " + In("probes.h5") + " " + link, "are the same file"},
      {"extract -c " + In("init.h5") + " --prompts 10 --ridge-lambda inf --quiet --out " +
           (tmp / "a.h5"),
       "--ridge-lambda"},
      // Library text that named nothing: Armadillo's "pinv(): svd failed" on labels that
      // overflow, LibTorch's "cannot be converted to type float".
      {"baselines --prompts 5 --w-scale 1e200", "--w-scale: must be at most 1e+06"},
      {"train " + kTiny + "--steps 2 --lr 1e39 --quiet --out " + (tmp / "a.h5"), "fit float32"},
  };
  for (const auto& [cmd, says] : cases) {
    ExpectRefused(RunIclprobe(cmd), cmd, says);
    EXPECT_FALSE(fs::exists(tmp / "p.h5")) << cmd;
    EXPECT_FALSE(fs::exists(tmp / "a.h5")) << cmd;
    EXPECT_FALSE(fs::exists(tmp / "a.h5.partial")) << cmd;
  }
  ExpectRefused(RunIclprobe("inspect " + In("init.h5") + " --export ''"), "export ''",
                "--export: expected the file to write");
  // An interventions file that lists a layer twice.
  const std::string iv = tmp / "iv.h5";
  ASSERT_EQ(RunIclprobe("intervene -c " + In("init.h5") + " --probes " + In("probes.h5") +
                        " --target xty --layers 1 --k 3 --pairs 20 --threads 1 --quiet --out " + iv)
                .exit_code,
            0);
  {
    h5::File f = h5::File::Open(iv, h5::File::Mode::kReadWrite);
    f.SetAttr("layers", std::vector<std::int64_t>{1, 1});
  }
  ExpectRefused(RunIclprobe("report --probes " + In("probes.h5") + " --k 3 --interventions " + iv),
                "interventions layer twice", "lists an entry twice");
  // A probes file that lists a layer beyond its model's.
  const std::string p99 = Copy(tmp, "probes.h5");
  {
    h5::File f = h5::File::Open(p99, h5::File::Mode::kReadWrite);
    auto layers = f.GetIntList("layers");
    layers.back() = 99;
    f.SetAttr("layers", layers);
  }
  ExpectRefused(RunIclprobe("report --probes " + p99), "layer 99", "lists layer 99");
  // File names that are not plain become learner1, learner2 in the family's tables.
  const std::string odd = tmp / "a,b|c&d.h5";
  fs::copy_file(In("probes.h5"), odd);
  for (const char* format : {"csv", "md", "tex"}) {
    const auto r = RunIclprobe("report --probes " + In("probes.h5") + " '" + odd +
                               "' --k 3 --format " + format);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("a,b|c&d"), std::string::npos) << format << "\n" << r.out;
    EXPECT_NE(r.out.find("learner2"), std::string::npos) << format;
  }
}

// gnuplot fails: report exits 2 and leaves no table under its final name.
TEST_F(Reliability, AFailedPlotLeavesNoTableBehind) {
  TempDir tmp;
  const std::string fake = tmp / "gnuplot";
  { std::ofstream(fake) << "#!/bin/sh\nexit 1\n"; }
  fs::permissions(fake, fs::perms::owner_all);
  const auto r =
      RunShell("ICLPROBE_GNUPLOT='" + fake + "' '" + test::IclprobeBin() + "' report --probes " +
               In("probes.h5") + " --out " + (tmp / "t.md") + " --plot-dir " + (tmp / "plots"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "t.md"));
  EXPECT_FALSE(fs::exists(tmp / "t.md.partial"));
}

// A disk that is full before the first checkpoint: the message says so (it said "cannot
// create (it exists)"). Needs a small file system of its own: a 64 KiB tmpfs, mounted where
// the test may (root, as CI runs); skipped elsewhere.
TEST_F(Reliability, AFullDiskBeforeTheFirstCheckpointIsCalledAFullDisk) {
  TempDir tmp;
  const std::string disk = tmp / "disk";
  fs::create_directory(disk);
  if (RunShell("mount -t tmpfs -o size=64k tmpfs '" + disk + "' 2>/dev/null").exit_code != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here";
  RunShell("head -c 60000 /dev/zero > '" + disk + "/fill'");
  const auto r = RunIclprobe("train " + kTiny +
                             "--steps 4 --batch 4 --eval-every 2 --save-every 2 --eval-prompts 8 "
                             "--threads 1 --quiet --out " +
                             disk + "/t.h5");
  RunShell("umount '" + disk + "'");
  ExpectRefused(r, "full disk", "full");
  EXPECT_EQ(r.err.find("it exists"), std::string::npos) << r.err;
}

// String attributes of every shape, on every file kind the Python module opens: a list where a
// string is expected (or extra lists of any length) gives the right value or a ValueError, never
// a signal. The module's reader once read a list into one char*, overwriting the stack.
TEST(ModuleReaders, StringListAttributesNeverCrashOpen) {
#ifndef ICL_PYTHONPATH
  GTEST_SKIP() << "the Python module is not built (ICLPROBE_PYTHON=OFF)";
#else
  TempDir dir;
  const auto ok = [](const std::string& args) {
    const auto r = RunIclprobe(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  };
  const std::string ck = dir / "gd.h5";
  ok("construct --program gd --alpha 0.05 --d 4 --n 8 --out " + ck);
  ok("extract -c " + ck + " --prompts 200 --threads 1 --quiet --out " + (dir / "acts.h5"));
  ok("probe -a " + (dir / "acts.h5") + " --targets xty --probes ridge --k 3 --threads 1 --quiet " +
     "--out " + (dir / "probes.h5"));
  ok("intervene -c " + ck + " --probes " + (dir / "probes.h5") +
     " --target xty --response gd:0.05 --layers 2 --k 3 --pairs 40 --threads 1 --quiet --out " +
     (dir / "interventions.h5"));
  ok("swap -c " + ck + " --learners ols,gd:0.05,ridge:0.1 --pairs 40 --bootstrap 50 --k 3 " +
     "--quiet --out " + (dir / "swaps.h5"));
  ok("erase -c " + ck + " --layers 2 --k 4 --fit-prompts 200 -N 60 --bootstrap 50 --quiet --out " +
     (dir / "erasure.h5"));
  ok("das -c " + ck + " --quantity xty --algorithm gd:0.05 --layers 2 --m 2 --k 3 " +
     "--train-pairs 100 --test-pairs 40 --epochs 1 --bootstrap 50 --quiet --out " +
     (dir / "das.h5"));
  ok("trace -c " + ck + " --algorithms gd:0.05:2 --prompts 100 --bootstrap 50 --quiet --out " +
     (dir / "trace.h5"));
  // One Python process per file kind opens every variant in turn (the module's start-up, which
  // loads LibTorch, dominated a process per file). Each open is announced before it starts, so a
  // signal (a non-zero exit) names the file it died on; a refusal must be an exception whose
  // class ends in "Error" and whose message names the file.
  const std::string script =
      "'import sys, iclprobe\n"
      "for p in sys.argv[1:]:\n"
      "    print(\"open \" + p, flush=True)\n"
      "    try:\n"
      "        r = iclprobe.open(p)\n"
      "        print(\"ok \" + repr(getattr(r, \"attrs\", None)), flush=True)\n"
      "    except Exception as e:\n"
      "        print(\"refused \" + type(e).__name__ + \" \" + str(e).replace(chr(10), \" \"), "
      "flush=True)\n' ";
  const std::string python = std::string("PYTHONPATH='") + ICL_PYTHONPATH +
                             "' OMP_WAIT_POLICY=passive " + ICL_PYTHON3 + " -c " + script;
  for (const std::string kind :
       {"acts", "probes", "interventions", "swaps", "erasure", "das", "trace"}) {
    SCOPED_TRACE(kind);
    // Extra attributes of every shape on a valid file: it still opens, lists stay lists.
    const std::string extra = dir / (kind + "_extra.h5");
    fs::copy_file(dir / (kind + ".h5"), extra);
    for (int n : {-1, 0, 1, 3, 50})
      for (bool fixed : {false, true})
        test::WriteStringAttribute(extra, "/", (fixed ? "fix" : "var") + std::to_string(n), n,
                                   fixed);
    // An attribute the reader expects as a string ("format", "task_config", "checkpoint")
    // replaced by lists of 0, 1, 3 and 50 entries: a clean error or a value, no signal.
    std::vector<std::string> bad;
    for (const std::string attr : {"format", "task_config", "checkpoint"})
      for (int n : {0, 1, 3, 50})
        for (bool fixed : {false, true}) {
          bad.push_back(dir / (kind + "_" + attr + "_" + std::to_string(n) +
                               (fixed ? "_fixed" : "_var") + ".h5"));
          fs::copy_file(dir / (kind + ".h5"), bad.back());
          test::WriteStringAttribute(bad.back(), "/", attr, n, fixed);
        }
    std::string args = extra;
    for (const auto& b : bad)
      args += " " + b;
    const auto r = RunShell(python + args);
    ASSERT_EQ(r.exit_code, 0) << "the last file opened is the one it died on\n"
                              << r.out << "\n"
                              << r.err;
    std::istringstream lines(r.out);
    std::string line, opened;
    std::size_t outcomes = 0;
    while (std::getline(lines, line)) {
      if (line.rfind("open ", 0) == 0) {
        opened = line.substr(5);
        continue;
      }
      ++outcomes;
      if (opened == extra) {
        ASSERT_EQ(line.rfind("ok ", 0), 0u) << line;
        if (line != "ok None") {  // Results: its attrs printed
          EXPECT_NE(line.find("'var3': ['s0', 's1', 's2']"), std::string::npos) << line;
          EXPECT_NE(line.find("'fix1': ['s0']"), std::string::npos) << line;
          EXPECT_NE(line.find("'var-1': 's0'"), std::string::npos) << line;
        }
        continue;
      }
      // A refusal is an exception naming the file.
      if (line.rfind("refused ", 0) == 0) {
        const std::string type = line.substr(8, line.find(' ', 8) - 8);
        EXPECT_TRUE(type.size() > 5 && type.compare(type.size() - 5, 5, "Error") == 0) << line;
        EXPECT_NE(line.find(opened), std::string::npos) << line;
      } else {
        EXPECT_EQ(line.rfind("ok ", 0), 0u) << line;
      }
    }
    EXPECT_EQ(outcomes, 1 + bad.size()) << r.out;
  }
#endif
}

// ---- Non-finite or absurd results written with exit 0 --------------------------------------

namespace {

// A refusal in the program's words: exit 2, one line, `words` in it, no text of the libraries
// underneath (LibTorch's c10::, Armadillo's svd() and pinv()).
void ExpectRefusedNaming(const test::CommandResult& r, const std::string& what,
                         const std::vector<std::string>& words) {
  ExpectRefused(r, what);
  for (const std::string& w : words)
    EXPECT_NE(r.err.find(w), std::string::npos) << what << ": lacks '" << w << "'\n" << r.err;
  for (const char* lib : {"c10::", "svd(", "pinv("})
    EXPECT_EQ(r.err.find(lib), std::string::npos) << what << "\n" << r.err;
}

std::vector<double> ReadDoubles(const std::string& file, const std::string& dataset) {
  return h5::File::Open(file).OpenDataset(dataset).ReadAll<double>();
}

}  // namespace

// ---- Messages: silent duplicates, empty list entries, the option or file named ----------------

namespace {

// Text of a library underneath (LibTorch, Armadillo, pybind11, the allocator) that names
// nothing the user typed.
void ExpectNoLibraryText(const std::string& err, const std::string& what) {
  for (const char* text : {"c10::", "svd(", "pinv(", "incompatible function arguments",
                           "can't allocate memory", "without overflow", "out of memory"})
    EXPECT_EQ(err.find(text), std::string::npos) << what << ": " << text << "\n" << err;
}

}  // namespace

// Newton-Schulz from C I leaves its convergence region when C lambda_max(X'X) >= 2: with C = 10
// (or 1e6) and unit-variance x that is every prompt with an example, and 12 squarings of a
// factor above 1 overflow to inf, then NaN. Nothing in activations.h5 or the baselines table
// may be undefined, so both are refused, naming the option and the spec.
TEST_F(Reliability, DivergingLearnersAreRefusedNotWrittenAsNaN) {
  TempDir tmp;
  ExpectRefusedNaming(RunIclprobe("extract -c " + In("init.h5") +
                                  " --prompts 64 --learner-targets newton:12:10 --threads 1 "
                                  "--quiet --out " +
                                  (tmp / "a.h5")),
                      "extract newton:12:10", {"--learner-targets", "newton:12:10"});
  EXPECT_FALSE(fs::exists(tmp / "a.h5"));
  ExpectRefusedNaming(
      RunIclprobe("baselines --d 3 --n 5 --prompts 64 --learners ols,newton:12:1e6"),
      "baselines newton:12:1e6", {"--learners", "newton:12:1e6"});
  ExpectRefusedNaming(RunIclprobe("baselines --d 3 --n 5 --prompts 64 --learners ols,newton:12:1e6 "
                                  "--csv " +
                                  (tmp / "b.csv")),
                      "baselines --csv", {"--learners"});
  EXPECT_FALSE(fs::exists(tmp / "b.csv"));
  // Inside the region the same learners are stored and tabled.
  EXPECT_EQ(RunIclprobe("extract -c " + In("init.h5") +
                        " --prompts 64 --learner-targets newton:12 --threads 1 --quiet --out " +
                        (tmp / "ok.h5"))
                .exit_code,
            0);
}

// Two pairs: a bootstrap resample draws the same pair twice with probability 1/2, and has no
// spread in the reference's change to divide by; the share reproduced on it is undefined, and
// so is every percentile interval over the replicates (the probability that none of 50 such
// resamples is degenerate is 2^-50). The file holds NaN there (its schema says so in the
// attribute 'undefined'), the table prints "undefined", the CSV an empty cell. It used to hold
// 1 - e / 1e-300, numbers like -2.7e297.
TEST_F(Reliability, AnIntervalFromTooFewPairsIsUndefinedNotANumber) {
  TempDir tmp;
  const std::string ck = tmp / "gd.h5";
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + ck).exit_code,
            0);
  const std::string s = tmp / "s.h5";
  const auto r = RunIclprobe("swap -c " + ck + " --learners gd:0.05 --pairs 2 --bootstrap 50 " +
                             "--layers 0,2 --k 2,4 --quiet --out " + s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name :
       {"pooled_reproduced_lo", "pooled_reproduced_hi", "reproduced_lo", "reproduced_hi"})
    for (const double v : ReadDoubles(s, name))
      EXPECT_TRUE(std::isnan(v)) << name << " = " << v;
  // The slope through the origin, sum dm da / sum da^2, is defined on one pair (da != 0): its
  // intervals stay numbers.
  for (const char* name : {"pooled_slope_lo", "slope_hi"})
    for (const double v : ReadDoubles(s, name))
      EXPECT_TRUE(std::isfinite(v)) << name << " = " << v;
  for (const double v : ReadDoubles(s, "pooled_reproduced"))
    EXPECT_TRUE(std::isfinite(v)) << v;  // the estimate itself rests on both pairs
  EXPECT_TRUE(h5::File::Open(s).OpenDataset("pooled_reproduced_lo").HasAttr("undefined"));
  EXPECT_TRUE(std::isnan(intervene::ReadSwapsFile(s).pooled_reproduced_lo(0, 0)));  // reads back
  EXPECT_NE(r.out.find("undefined"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("e+"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  const std::string csv = test::ReadFile(tmp / "s.csv");
  EXPECT_EQ(csv.find("nan"), std::string::npos) << csv;
  // Over 60 pairs no resample lacks spread (each would have to draw one pair 60 times): the
  // intervals are numbers.
  const auto many = RunIclprobe("swap -c " + ck + " --learners gd:0.05 --pairs 60 --bootstrap 50 " +
                                "--layers 0,2 --k 2,4 --quiet --out " + (tmp / "m.h5"));
  ASSERT_EQ(many.exit_code, 0) << many.err;
  for (const double v : ReadDoubles(tmp / "m.h5", "pooled_reproduced_lo"))
    EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_EQ(many.out.find("undefined"), std::string::npos) << many.out;

  // DAS on two test pairs: the same for IIA's intervals.
  const std::string d = tmp / "d.h5";
  const auto das = RunIclprobe("das -c " + ck + " --quantity xty --algorithm gd:0.05 --layers 2 " +
                               "--m 1 --k 2,4 --train-pairs 40 --test-pairs 2 --epochs 1 " +
                               "--bootstrap 50 --quiet --out " + d);
  ASSERT_EQ(das.exit_code, 0) << das.err;
  for (const char* name : {"iia_lo", "iia_hi", "none_iia_lo", "full_iia_hi"})
    for (const double v : ReadDoubles(d, name))
      EXPECT_TRUE(std::isnan(v)) << name << " = " << v;
  EXPECT_NE(das.out.find("undefined"), std::string::npos) << das.out;
  EXPECT_TRUE(std::isnan(intervene::ReadDasFile(d).iia_lo(0, 0)));
  EXPECT_EQ(das.out.find("e+"), std::string::npos) << das.out;
}

// An algorithm whose counterfactual output never changes (zero predicts 0 whatever B's examples)
// leaves IIA = 1 - sum (o - t)^2 / sum (t - mean t)^2 undefined at any number of pairs: refused,
// naming --algorithm (its intervals read -5.1e300 and its IIA 0).
TEST_F(Reliability, DasRefusesAnAlgorithmWithoutACounterfactualChange) {
  TempDir tmp;
  const std::string ck = tmp / "gd.h5";
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + ck).exit_code,
            0);
  ExpectRefusedNaming(RunIclprobe("das -c " + ck + " --quantity w --algorithm zero --layers 2 " +
                                  "--m 1 --k 2,4 --train-pairs 40 --test-pairs 20 --epochs 1 " +
                                  "--bootstrap 50 --quiet --out " + (tmp / "d.h5")),
                      "das --algorithm zero", {"--algorithm", "zero", "undefined"});
  EXPECT_FALSE(fs::exists(tmp / "d.h5"));
}

// X'y + sigma (P x)^2 in float32 loses X'y entirely once sigma (P x)^2 is 2^24 times larger, and
// the next MLP's subtraction cannot bring it back: at sigma = 1e30 the written model no longer
// computes gd. construct refuses a sigma whose rounding exceeds the products' own error
// (kMaxNuisance, 559); the experiments' 32 is far inside.
TEST_F(Reliability, ConstructRefusesANuisanceItCannotRemove) {
  TempDir tmp;
  ExpectRefusedNaming(
      RunIclprobe("construct --program gd --d 4 --n 8 --nuisance 1e30 --out " + (tmp / "big.h5")),
      "nuisance 1e30", {"--nuisance", "float32", "559"});
  EXPECT_FALSE(fs::exists(tmp / "big.h5"));
  EXPECT_FALSE(fs::exists(tmp / "big.h5.partial"));
  EXPECT_EQ(RunIclprobe("construct --program gd --d 4 --n 8 --nuisance 32 --out " + (tmp / "ok.h5"))
                .exit_code,
            0);
}

// ---- Hostile files accepted -----------------------------------------------------

// A NaN in /construction/rotation passed the orthogonality test (Armadillo's max() passes over
// NaN), so inspect accepted the file and das stopped in Armadillo's "svd(): decomposition
// failed". Every reader of the record refuses it, naming the file and the dataset.
TEST_F(Reliability, ANonFiniteRotationIsRefusedNamingTheFileAndDataset) {
  TempDir tmp;
  const std::string ck = tmp / "rot.h5";
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 0.05 --rotate 7 --d 3 --n 6 --out " + ck)
                .exit_code,
            0);
  {
    const h5::Dims dims = h5::File::Open(ck).OpenDataset("construction/rotation").dims();
    std::vector<double> q = ReadDoubles(ck, "construction/rotation");
    q[1] = std::nan("");
    DeleteLink(ck, "construction/rotation");
    h5::File f = h5::File::Open(ck, h5::File::Mode::kReadWrite);
    f.CreateDataset<double>("construction/rotation", dims).Write(q.data(), q.size());
  }
  for (const std::string& cmd :
       {"inspect " + ck,
        "das -c " + ck + " --quantity xty --algorithm gd:0.05 --layers 2 --m 1 --k 2,4 " +
            "--train-pairs 40 --test-pairs 20 --epochs 1 --bootstrap 50 --quiet --out " +
            (tmp / "d.h5")})
    ExpectRefusedNaming(RunIclprobe(cmd), cmd, {ck, "/construction", "rotation", "NaN"});
  EXPECT_FALSE(fs::exists(tmp / "d.h5"));
}

// train ends every line of its log with '\n'. A log cut 7 bytes short ends in the middle of
// its last number (2.88e-22 read as 2.88...): inspect --half refuses it, naming the log, where it
// used to compare the half run's cut number.
TEST_F(Reliability, ATornTrainingLogIsRefused) {
  TempDir tmp;
  auto train = [&](const std::string& name, int steps) {
    const auto t = RunIclprobe("train " + kTiny + "--batch 8 --eval-every 5 --save-every 5 " +
                               "--eval-prompts 16 --threads 1 --quiet --seed 1 --steps " +
                               std::to_string(steps) + " --warmup " + std::to_string(steps / 10) +
                               " --out " + (tmp / name));
    ASSERT_EQ(t.exit_code, 0) << t.err;
  };
  train("full.h5", 20);
  train("half.h5", 10);
  const std::string inspect =
      "inspect " + (tmp / "full.h5") + " --half " + (tmp / "half.h5") + " --threads 1";
  ASSERT_EQ(RunIclprobe(inspect).exit_code, 0);
  const std::string log = tmp / "half.train.csv";
  ASSERT_EQ(test::ReadFile(log).back(), '\n');
  fs::resize_file(log, fs::file_size(log) - 7);
  ExpectRefusedNaming(RunIclprobe(inspect), "torn log", {log, "newline"});
}

// A stray comma, or an empty value from an unset shell variable, is refused naming the option;
// before, trace --algorithms, probe --codelength-blocks and others skipped the empty entry.
TEST_F(Reliability, EmptyListEntriesAreRefusedNamingTheOption) {
  TempDir tmp;
  const std::string out = " --quiet --out " + (tmp / "o.h5");
  const std::string ck = " -c " + In("init.h5");
  const std::string acts = " -a " + In("acts.h5");
  const std::string probes = " --probes " + In("probes.h5");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"trace" + ck + " --algorithms newton:4,,gd:0.05:8" + out, "--algorithms: "},
      {"trace" + ck + " --algorithms gd:0.05:8, " + out, "--algorithms: "},
      {"trace" + ck + " --algorithms newton:4 --k 1,,2" + out, "--k: "},
      {"probe" + acts + " --codelength --codelength-blocks 0.5,1," + out, "--codelength-blocks: "},
      {"probe" + acts + " --targets w_ols," + out, "--targets: "},
      {"probe" + acts + " --k 3,,5" + out, "--k: "},
      {"probe" + acts + " --layers 0,,1" + out, "--layers: "},
      {"probe" + acts + " --lambdas 0.1,,1" + out, "--lambdas: "},
      {"probe" + acts + " --probes ridge," + out, "--probes: "},
      {"probe" + acts + " --split 0.8,,0.2" + out, "--split: "},
      {"construct --program gd --d 3 --n 5 --decoy '' --out " + (tmp / "o.h5"), "--decoy: "},
      {"baselines --prompts 5 --learners ols,,gd:0.1", "--learners: "},
      {"compare" + ck + " --prompts 10 --learners ols, --quiet", "--learners: "},
      {"compare --cell a=" + In("init.h5") + ",," + In("run.h5") + " --prompts 10 --quiet",
       "--cell: "},
      {"extract" + ck + " --prompts 10 --learner-targets gd:0.1:2," + out, "--learner-targets: "},
      {"report" + probes + " --compare-targets w_ols,,xty", "--compare-targets: "},
      {"report" + probes + " --compare-probes ridge,", "--compare-probes: "},
      {"report" + probes + " --k 3,,5", "--k: "},
      {"intervene" + ck + probes + " --target xty --k 3," + out, "--k: "},
      {"swap" + ck + " --learners ols,,gd:0.1" + out, "--learners: "},
      {"erase" + ck + " --target xty --k 3,,4" + out, "--k: "},
      {"das" + ck + " --quantity w --algorithm ols --m 1,,2" + out, "--m: "},
  };
  for (const auto& [cmd, option] : cases) {
    const auto r = RunIclprobe(cmd);
    ExpectRefused(r, cmd, option);
    EXPECT_NE(r.err.find("empty"), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_FALSE(fs::exists(tmp / "o.h5")) << cmd;
  }
}

// The same checkpoint twice (by path, or through a link) would write every row twice.
TEST_F(Reliability, BaselinesTakeEachCheckpointOnce) {
  TempDir tmp;
  const std::string link = tmp / "link.h5";
  fs::create_hard_link(In("init.h5"), link);
  for (const std::string& second : {In("init.h5"), link}) {
    const std::string cmd = "baselines -c " + In("init.h5") + " -c " + second +
                            " --prompts 5 --learners ols --csv " + (tmp / "b.csv");
    ExpectRefused(RunIclprobe(cmd), cmd, "--checkpoint: '" + second + "' is given twice");
    EXPECT_FALSE(fs::exists(tmp / "b.csv")) << cmd;
  }
}

// A learner spec's message names the option it was given with (das --algorithm, trace
// --algorithms, extract --learner-targets), not --learners, which these commands do not have.
TEST_F(Reliability, LearnerSpecMessagesNameTheOptionTyped) {
  TempDir tmp;
  const std::string out = " --quiet --out " + (tmp / "o.h5");
  const std::string ck = " -c " + In("init.h5");
  std::vector<std::pair<std::string, std::string>> cases;
  for (const char* spec : {"ridge:-1", "gd:0", "gd:0.1:0", "sgd:-1", "newton:0", "newton:3:-1",
                           "newton:3:1:-1", "knn:0", "bogus"})
    cases.push_back({"das" + ck + " --quantity w --algorithm " + spec + out, "--algorithm: "});
  cases.push_back({"trace" + ck + " --algorithms newton:3:-1" + out, "--algorithms: "});
  cases.push_back(
      {"extract" + ck + " --prompts 10 --learner-targets ridge:-1" + out, "--learner-targets: "});
  for (const auto& [cmd, option] : cases) {
    const auto r = RunIclprobe(cmd);
    ExpectRefused(r, cmd, option);
    EXPECT_EQ(r.err.find("--learners"), std::string::npos) << cmd << "\n" << r.err;
  }
}

// Values whose construction's weights overflow float32 are refused naming the option, not with
// LibTorch's "value cannot be converted to type float without overflow".
TEST_F(Reliability, ConstructionsThatOverflowFloat32AreRefusedNamingTheOption) {
  TempDir tmp;
  const std::string out = " --d 3 --n 5 --out " + (tmp / "c.h5");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"construct --program newton:3:0.07:1e308" + out, "--program: "},
      {"construct --program gd --alpha 1e38" + out, "--alpha: "},
      {"construct --program gd --alpha 1e39" + out, "--alpha: "},
      {"construct --program gd:3 --alpha 1e200" + out, "--alpha: "},
  };
  for (const auto& [cmd, option] : cases) {
    const auto r = RunIclprobe(cmd);
    ExpectRefused(r, cmd, option);
    EXPECT_NE(r.err.find("float32"), std::string::npos) << cmd << "\n" << r.err;
    ExpectNoLibraryText(r.err, cmd);
    EXPECT_FALSE(fs::exists(tmp / "c.h5")) << cmd;
  }
}

// An MLP probe a billion units wide is refused by its documented limit, not by the allocator.
TEST_F(Reliability, AnImpossibleMlpWidthIsRefusedNamingTheOption) {
  TempDir tmp;
  const std::string cmd = "probe -a " + In("acts.h5") +
                          " --probes mlp --k 3 --mlp-hidden 1000000000 --threads 1 --quiet --out " +
                          (tmp / "p.h5");
  const auto r = RunIclprobe(cmd);
  ExpectRefused(r, cmd, "--mlp-hidden: at most 65536");
  ExpectNoLibraryText(r.err, cmd);
  EXPECT_FALSE(fs::exists(tmp / "p.h5"));
}

// Arrays that cannot fit are refused before the allocation, naming the option that sized them:
// 10^8 query points per context would take terabytes.
TEST_F(Reliability, ARequestLargerThanMemoryIsRefusedNamingTheOption) {
  TempDir tmp;
  for (const auto& [cmd, says] : std::vector<std::pair<std::string, std::string>>{
           {"compare -c " + In("init.h5") + " --prompts 5 --queries 100000000 --quiet",
            "--queries: the query points of the implicit weights would take about"},
           {"compare -c " + In("init.h5") + " --prompts 2000000000 --quiet",
            "--prompts: the prompts and their predictions would take about"}}) {
    const auto r = RunIclprobe(cmd);
    ExpectRefused(r, cmd, says);
    ExpectNoLibraryText(r.err, cmd);
  }
}
