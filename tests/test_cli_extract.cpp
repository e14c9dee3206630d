// End to end: `iclprobe extract` — contents, determinism, resume (also after SIGKILL), refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <thread>

#include "core/hdf5.hpp"
#include "data/targets.hpp"
#include "extract/activations.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::CountLines;
using test::RunIclprobe;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

// A tiny untrained learner (d=3, n_max=5, L=2, H=16) shared by the tests of this file.
class CliExtract : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const auto r = RunIclprobe(
        "train --d 3 --n 5 --layers 2 --hidden 16 --heads 2 --init-only --seed 5 --quiet --out " +
        (*dir_ / "tiny.h5"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Ckpt() { return *dir_ / "tiny.h5"; }
  static TempDir* dir_;
};
TempDir* CliExtract::dir_ = nullptr;

const std::vector<std::string> kDatasets = {"hidden/layer_00",
                                            "hidden/layer_01",
                                            "hidden/layer_02",
                                            "predictions",
                                            "prompts/x",
                                            "prompts/y",
                                            "prompts/w",
                                            "targets/w_ols",
                                            "targets/w_ridge",
                                            "targets/xty",
                                            "targets/xtx",
                                            "targets/w",
                                            "provenance/group_sha256"};

// Every dataset of two files, compared bit for bit (as doubles: float32 converts exactly).
// Exact by construction, whatever --batch: extract runs the model on groups of kComputeGroup = 32
// prompts aligned to absolute prompt indices and zero-padded to a whole group (batches and
// chunks are multiples of 32, also after --resume), so every prompt goes through the same
// [32, 2n, d+1] forward pass; targets and prompts are per-prompt double code that does not see
// the batch. --threads (1 vs 2 here) only changes how work is shared out: OpenBLAS splits a GEMM
// by whole rows / columns of C (never along the dot products), ATen's LayerNorm and softmax
// split by rows, and for this tiny model (H = 16) every elementwise tensor of a group stays
// below ATen's parallel grain of 32768 elements, so each element is computed by the same
// instruction sequence on the same machine. This is the documented guarantee
// (docs/guide/extract.md: the datasets do not depend on --batch or --threads); a difference here
// is a bug, not rounding.
void ExpectSameDatasets(const std::string& a, const std::string& b) {
  const h5::File fa = h5::File::Open(a), fb = h5::File::Open(b);
  for (const auto& name : kDatasets) {
    if (!fa.Exists(name)) continue;
    EXPECT_EQ(fa.OpenDataset(name).ReadAll<double>(), fb.OpenDataset(name).ReadAll<double>())
        << name;
  }
  // The content digest: the same rows and settings give the same digest.
  EXPECT_EQ(fa.GetString("content_sha256"), fb.GetString("content_sha256"));
}

}  // namespace

// The names of the positions stored, as --positions (and the Python module's positions=) give
// them.
TEST(ExtractConfig, PositionsParseTheirNamesAndRefuseOthers) {
  EXPECT_EQ(extract::ParsePositions("all"), extract::Positions::kAll);
  EXPECT_EQ(extract::ParsePositions("y"), extract::Positions::kY);
  EXPECT_EQ(test::InputErrorOf([] { extract::ParsePositions("x"); }),
            "positions: expected all or y, got 'x'");
  EXPECT_EQ(test::InputErrorOf([] { extract::ParsePositions("Y"); }),
            "positions: expected all or y, got 'Y'");
}

TEST_F(CliExtract, WritesEveryLayerTargetsAndAttributesReadableByH5ls) {
  TempDir tmp;
  const std::string out = tmp / "acts.h5";
  const auto r = RunIclprobe("extract -c " + Ckpt() +
                             " --prompts 70 --seed 3 --threads 1 --quiet --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out + ".partial"));
  const auto ls = test::RunShell("h5ls -r '" + out + "'");
  ASSERT_EQ(ls.exit_code, 0);
  for (const char* layer : {"/hidden/layer_00", "/hidden/layer_01", "/hidden/layer_02"})
    EXPECT_TRUE(test::H5lsHasDataset(ls.out, layer, "70/Inf, 10, 16")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/predictions", "70/Inf, 5")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/prompts/x", "70/Inf, 5, 3")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/prompts/y", "70/Inf, 5")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/prompts/w", "70/Inf, 3")) << ls.out;
  for (const char* t : {"/targets/w_ols", "/targets/w_ridge", "/targets/xty"})
    EXPECT_TRUE(test::H5lsHasDataset(ls.out, t, "70/Inf, 5, 3")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/targets/xtx", "70/Inf, 5, 3, 3")) << ls.out;
  EXPECT_NE(ls.out.find("/targets/w               Dataset, same as /prompts/w"), std::string::npos)
      << ls.out;
  const auto header = test::RunShell("h5dump -H '" + out + "'");
  EXPECT_EQ(header.exit_code, 0);

  const auto info = extract::ReadActivationsInfo(out);
  EXPECT_EQ(info.prompts, 70);
  EXPECT_EQ(info.layers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(info.checkpoint_sha256.size(), 64u);
  const h5::File f = h5::File::Open(out);
  for (const char* a :
       {"created_by", "layer_semantics", "token_layout", "model_config", "task_config"})
    EXPECT_FALSE(f.GetString(a).empty()) << a;
  EXPECT_EQ(f.GetInt("n_complete"), 70);
  EXPECT_EQ(f.GetInt("seed"), 3);
  EXPECT_DOUBLE_EQ(f.OpenDataset("targets/w_ridge").GetDouble("ridge_lambda"), 0.1);

  // The stored prompts are the seeded prompts, and the targets are theirs. Exact by construction:
  // the sampler is a counter-based RNG per prompt, and ComputeTargets is the same compiled code
  // (icl_data) run per prompt on the same doubles, in tiny d = 3 products that BLAS never threads.
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  const auto set = data::SamplePrompts(t, 3, 0, 70);
  EXPECT_EQ(f.OpenDataset("prompts/y").ReadAll<double>(),
            std::vector<double>(set.y.begin(), set.y.end()));
  const auto targets = data::ComputeTargets(set, 0.1);
  EXPECT_EQ(f.OpenDataset("targets/xtx").ReadAll<double>(),
            std::vector<double>(targets.xtx.begin(), targets.xtx.end()));
  EXPECT_EQ(f.OpenDataset("targets/w_ols").ReadAll<double>(),
            std::vector<double>(targets.w_ols.begin(), targets.w_ols.end()));
}

TEST_F(CliExtract, LayerAndPositionSelection) {
  TempDir tmp;
  const std::string out = tmp / "y.h5";
  const auto r =
      RunIclprobe("extract -c " + Ckpt() +
                  " --prompts 40 --layers 0,2 --positions y --threads 1 --quiet --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = extract::ReadActivationsInfo(out);
  EXPECT_EQ(info.layers, (std::vector<int>{0, 2}));
  EXPECT_EQ(info.positions_per_prompt, 5);
  const h5::File f = h5::File::Open(out);
  EXPECT_FALSE(f.Exists("hidden/layer_01"));
  // The y-token states equal the odd positions of a full extraction. Exact by construction: both
  // runs compute the same [32, 2n, d+1] groups with --threads 1; --positions y only slices them.
  const std::string full = tmp / "full.h5";
  ASSERT_EQ(RunIclprobe("extract -c " + Ckpt() + " --prompts 40 --threads 1 --quiet --out " + full)
                .exit_code,
            0);
  const auto all = h5::File::Open(full).OpenDataset("hidden/layer_02").ReadAll<float>();
  const auto ys = f.OpenDataset("hidden/layer_02").ReadAll<float>();
  for (int p = 0; p < 40; ++p)
    for (int k = 1; k <= 5; ++k)
      for (int h = 0; h < 16; ++h)
        ASSERT_EQ(ys[(p * 5 + k - 1) * 16 + h], all[(p * 10 + 2 * k - 1) * 16 + h]);
}

TEST_F(CliExtract, IdenticalWhateverTheBatchAndThreads) {
  TempDir tmp;
  const std::string a = tmp / "a.h5", b = tmp / "b.h5", c = tmp / "c.h5";
  ASSERT_EQ(RunIclprobe("extract -c " + Ckpt() +
                        " --prompts 150 --batch 32 --threads 1 --quiet --out " + a)
                .exit_code,
            0);
  ASSERT_EQ(RunIclprobe("extract -c " + Ckpt() +
                        " --prompts 150 --batch 96 --threads 2 --quiet --out " + b)
                .exit_code,
            0);
  ASSERT_EQ(RunIclprobe("extract -c " + Ckpt() +
                        " --prompts 150 --batch 500 --threads 2 --compress --quiet --out " + c)
                .exit_code,
            0);
  ExpectSameDatasets(a, b);
  ExpectSameDatasets(a, c);
}

TEST_F(CliExtract, ResumeAfterAStopEqualsAnUninterruptedRun) {
  TempDir tmp;
  const std::string full = tmp / "full.h5", split = tmp / "split.h5";
  const std::string common = "extract -c " + Ckpt() + " --prompts 200 --threads 1 --quiet ";
  ASSERT_EQ(RunIclprobe(common + "--batch 32 --out " + full).exit_code, 0);
  auto r = RunIclprobe(common + "--batch 32 --stop-after-batches 3 --out " + split);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(split));
  ASSERT_TRUE(fs::exists(split + ".partial"));
  EXPECT_EQ(h5::File::Open(split + ".partial").GetInt("n_complete"), 96);
  EXPECT_THROW(extract::ReadActivationsInfo(split + ".partial"),
               std::invalid_argument);  // incomplete

  // Without --resume the partial file is not silently replaced.
  r = RunIclprobe(common + "--batch 32 --out " + split);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pass --resume"), std::string::npos) << r.err;
  // Other settings or another checkpoint are refused, naming the difference.
  r = RunIclprobe(common + "--batch 32 --seed 8 --resume --out " + split);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("seed 7 in the file vs 8 now"), std::string::npos) << r.err;
  const std::string other = tmp / "other.h5";
  ASSERT_EQ(
      RunIclprobe(
          "train --d 3 --n 5 --layers 2 --hidden 16 --heads 2 --init-only --seed 6 --quiet --out " +
          other)
          .exit_code,
      0);
  r = RunIclprobe("extract -c " + other +
                  " --prompts 200 --batch 32 --threads 1 --quiet --resume --out " + split);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("SHA-256"), std::string::npos) << r.err;

  r = RunIclprobe(common + "--batch 64 --resume --out " + split);  // another batch size is fine
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(split + ".partial"));
  ExpectSameDatasets(full, split);
}

TEST_F(CliExtract, ResumeAfterSigkillEqualsAnUninterruptedRun) {
  TempDir tmp;
  const std::string full = tmp / "full.h5", killed = tmp / "killed.h5";
  const std::string args =
      "extract -c " + Ckpt() + " --prompts 30000 --batch 32 --threads 1 --quiet ";
  ASSERT_EQ(RunIclprobe(args + "--out " + full).exit_code, 0);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd =
        "exec '" + test::IclprobeBin() + "' " + args + "--out " + killed + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it mid-run: once the partial file has grown past a few batches (each batch first
  // reserves its space plus 1 MiB, so the file grows ahead of what is written).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (fs::file_size(killed + ".partial", ec) > (4u << 20) && !ec) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  EXPECT_FALSE(fs::exists(killed));
  ASSERT_TRUE(fs::exists(killed + ".partial"));

  const auto r = RunIclprobe(args + "--resume --out " + killed);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameDatasets(full, killed);
}

TEST_F(CliExtract, RefusesToOverwriteWithoutForce) {
  TempDir tmp;
  const std::string out = tmp / "a.h5";
  const std::string args =
      "extract -c " + Ckpt() + " --prompts 10 --threads 1 --quiet --out " + out;
  ASSERT_EQ(RunIclprobe(args).exit_code, 0);
  const auto r = RunIclprobe(args + " --seed 9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pass --force"), std::string::npos) << r.err;
  EXPECT_EQ(h5::File::Open(out).GetInt("seed"), 7);  // untouched
  ASSERT_EQ(RunIclprobe(args + " --seed 9 --force").exit_code, 0);
  EXPECT_EQ(h5::File::Open(out).GetInt("seed"), 9);
}

TEST_F(CliExtract, BadInputIsOneLineExitTwoAndNoFinishedFile) {
  TempDir tmp;
  const std::string out = tmp / "acts.h5";
  { std::ofstream(tmp / "notes.txt") << "hello"; }
  const std::string plain = tmp / "plain.h5";
  { h5::File::Create(plain); }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-c " + (tmp / "missing.h5"), "no such file"},
      {"-c " + (tmp / "notes.txt"), "not an HDF5 file"},
      {"-c " + plain, "no 'format' attribute"},
      {"-c " + Ckpt() + " --n 9", "--n: the checkpoint"},
      {"-c " + Ckpt() + " --prompts 0", "--prompts: must be positive"},
      {"-c " + Ckpt() + " --prompts -5", "--prompts: must be positive"},
      {"-c " + Ckpt() + " --layers 0,3",
       "--layers: layer 3 does not exist; the model has states 0..2"},
      {"-c " + Ckpt() + " --layers 1,x", "--layers: expected comma-separated"},
      {"-c " + Ckpt() + " --positions x", "--positions: expected all or y"},
      {"--prompts 5", "--checkpoint: required"},
      {"-c " + Ckpt() + " --learner-targets knn:3", "--learner-targets: knn:3 has no weight"},
      {"-c " + Ckpt() + " --learner-targets zero", "--learner-targets: zero has no weight"},
      {"-c " + Ckpt() + " --learner-targets ols", "/targets/w_ols is stored already"},
      {"-c " + Ckpt() + " --learner-targets gd:0.1,gd:0.100", "is stored already"},
      {"-c " + Ckpt() + " --learner-targets gd:x", "--learner-targets: learner spec 'gd:x'"},
      {"-c " + Ckpt() + " --learner-targets gd:0.1,,ols", "--learner-targets: entry 2"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("extract --quiet " + args + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
    EXPECT_FALSE(fs::exists(out + ".partial")) << args;
  }
  // Output paths that cannot be written.
  for (const std::string& bad : {tmp / "none/acts.h5", std::string("/proc/acts.h5")}) {
    const auto r = RunIclprobe("extract --quiet -c " + Ckpt() + " --prompts 5 --out " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
  }
}

TEST_F(CliExtract, DiskFullIsOneLineExitTwoAndNoFinishedFile) {
  TempDir tmp;
  const std::string out = tmp / "acts.h5";
  // A 2 MiB file-size limit stands in for a full disk: writes past it fail with EFBIG.
  const auto r = test::RunShell("ulimit -f 2048; trap '' XFSZ; '" + test::IclprobeBin() +
                                "' extract --quiet -c " + Ckpt() +
                                " --prompts 20000 --threads 1 --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("disk full"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// The content digest extract records as it writes (hashing the rows in memory) is what a reader
// recomputes from the rows on disk (VerifyRows), and catches edits: a changed attribute fails
// the cheap check; a changed hidden-state value passes the cheap check (it reads no rows) and
// fails the full one, which names the group of 32 prompts that holds it.
// --learner-targets: each learner's weights after k examples under its own name, the
// spec kept in an attribute, covered by the row digests, and readable by probe. ridge:0.1 comes
// from the classical learner (a d x d solve per k) and w_ridge from data::IncrementalRidge (dual
// form and Sherman-Morrison updates): two independent paths to the same weights.
TEST_F(CliExtract, LearnerTargetsAreStoredUnderTheirOwnNames) {
  TempDir tmp;
  const std::string out = tmp / "acts.h5";
  const auto r = RunIclprobe("extract -c " + Ckpt() +
                             " --prompts 40 --seed 3 --threads 1 --quiet --ridge-lambda 0.1 "
                             "--learner-targets ridge:0.1,gd:0.05:3,newton:3:0.07:0.25 --out " +
                             out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = extract::ReadActivationsInfo(out);
  EXPECT_EQ(info.learner_targets,
            (std::vector<std::string>{"ridge:0.1", "gd:0.05:3", "newton:3:0.07:0.25"}));
  const h5::File f = h5::File::Open(out);
  EXPECT_EQ(f.OpenDataset("targets/w_gd_0.05_3").GetString("learner"), "gd:0.05:3");
  EXPECT_EQ(f.OpenDataset("targets/w_newton_3_0.07_0.25").dims(), (h5::Dims{40, 5, 3}));
  EXPECT_EQ(f.OpenDataset("targets/w_newton_3_0.07_0.25").DimLabels(),
            (std::vector<std::string>{"prompt", "k", "feature"}));
  const auto a = f.OpenDataset("targets/w_ridge_0.1").ReadAll<double>();
  const auto b = f.OpenDataset("targets/w_ridge").ReadAll<double>();
  ASSERT_EQ(a.size(), b.size());
  // Both solve a 3 x 3 system of condition <= (|X|^2 + 0.1) / 0.1 ~ 1e3 per k: agreement to
  // 1e3 * 1e-16 * |w| with |w| <= 10, bound 1e-10.
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-10) << i;
  // After k = 1 example gd:0.05:3 is three steps along x alone:
  // w_3 = (1 - (1 - 2 alpha |x|^2)^3) y x / |x|^2.
  {
    const auto x = f.OpenDataset("prompts/x").ReadAll<double>();  // [40, 5, 3]
    const auto y = f.OpenDataset("prompts/y").ReadAll<double>();  // [40, 5]
    const auto w = f.OpenDataset("targets/w_gd_0.05_3").ReadAll<double>();
    for (int i = 0; i < 40; ++i) {
      const double* xi = &x[i * 15];
      const double norm2 = xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2];
      const double gain = (1 - std::pow(1 - 2 * 0.05 * norm2, 3)) / norm2;
      for (int j = 0; j < 3; ++j)
        EXPECT_NEAR(w[i * 15 + j], gain * y[i * 5] * xi[j], 1e-12 * (1 + std::abs(gain * y[i * 5])))
            << i;
    }
  }
  EXPECT_NO_THROW(extract::VerifyRows(out, "verify-inputs"));
  {  // An edited learner target fails the row digests.
    const std::string edited = tmp / "edited.h5";
    fs::copy_file(out, edited);
    h5::File e = h5::File::Open(edited, h5::File::Mode::kReadWrite);
    h5::Dataset t = e.OpenDataset("targets/w_gd_0.05_3");
    std::vector<double> v = t.ReadAll<double>();
    v[7] += 1;
    t.Write(v.data(), v.size());
    EXPECT_THROW(extract::VerifyRows(edited, "verify-inputs"), std::invalid_argument);
  }
  const auto p = RunIclprobe("probe -a " + out +
                             " --targets w_gd_0.05_3,w_newton_3_0.07_0.25 --k 3 --layers 1 "
                             "--probes ridge --quiet --out " +
                             (tmp / "p.h5"));
  EXPECT_EQ(p.exit_code, 0) << p.err;
}

TEST_F(CliExtract, ContentDigestIsRecordedAndCatchesEdits) {
  TempDir tmp;
  const std::string out = tmp / "acts.h5";
  ASSERT_EQ(RunIclprobe("extract -c " + Ckpt() +
                        " --prompts 70 --seed 3 --threads 2 --quiet --out " + out)
                .exit_code,
            0);
  const auto info = extract::ReadActivationsInfo(out);
  ASSERT_EQ(info.content_sha256.size(), 64u);
  EXPECT_EQ(extract::ContentDigest(out), info.content_sha256);
  EXPECT_NO_THROW(extract::VerifyRows(out, "verify-inputs"));
  EXPECT_EQ(h5::File::Open(out).OpenDataset("provenance/group_sha256").dims(),
            (h5::Dims{3, 32}));  // ceil(70 / 32) groups

  const std::string edited = tmp / "edited.h5";
  fs::copy_file(out, edited);
  {
    h5::File f = h5::File::Open(edited, h5::File::Mode::kReadWrite);
    h5::Dataset h = f.OpenDataset("hidden/layer_01");
    std::vector<float> v = h.ReadAll<float>();
    v[40 * h.RowSize() + 3] += 1.0f;  // prompt 40: group 1, prompts 32..63
    h.Write(v.data(), v.size());
  }
  EXPECT_NO_THROW(extract::VerifyContentDigest(edited, "activations"));
  try {
    extract::VerifyRows(edited, "verify-inputs");
    ADD_FAILURE() << "an edited row passed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("prompts 32..63"), std::string::npos) << e.what();
  }
  // The same through probe: the cheap check passes, --verify-inputs refuses with exit 2.
  const std::string probe = "probe -a " + edited + " --targets xty --k 5 --layers 1 --quiet ";
  EXPECT_EQ(RunIclprobe(probe + "--out " + (tmp / "p1.h5")).exit_code, 0);
  const auto full = RunIclprobe(probe + "--verify-inputs --out " + (tmp / "p2.h5"));
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_EQ(CountLines(full.err), 1) << full.err;
  EXPECT_NE(full.err.find("prompts 32..63"), std::string::npos) << full.err;
  EXPECT_FALSE(fs::exists(tmp / "p2.h5"));

  const std::string relabelled = tmp / "relabelled.h5";
  fs::copy_file(out, relabelled);
  h5::File::Open(relabelled, h5::File::Mode::kReadWrite)
      .SetAttr("checkpoint_sha256", std::string(64, '0'));
  EXPECT_THROW(extract::VerifyContentDigest(relabelled, "activations"), std::invalid_argument);
  const auto cheap =
      RunIclprobe("probe -a " + relabelled + " --targets xty --k 5 --layers 1 --quiet --out " +
                  (tmp / "p3.h5"));
  EXPECT_EQ(cheap.exit_code, 2);
  EXPECT_NE(cheap.err.find("content digest"), std::string::npos) << cheap.err;
}

// --dtype float16: every hidden value is the float32 file's value rounded to nearest binary16
// (torch's conversion, round-to-nearest-even, is the independent path), read back as float by
// HDF5's own conversion; every other dataset is unchanged, the row digests verify, and probe
// reads the file.
TEST_F(CliExtract, Float16StoresTheRoundedStatesAndProbesReadThem) {
  TempDir tmp;
  const std::string f32 = tmp / "f32.h5", f16 = tmp / "f16.h5";
  const std::string common = "extract -c " + Ckpt() + " --prompts 70 --seed 3 --threads 1 --quiet ";
  ASSERT_EQ(RunIclprobe(common + "--out " + f32).exit_code, 0);
  const auto r = RunIclprobe(common + "--dtype float16 --out " + f16);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const h5::File a = h5::File::Open(f32), b = h5::File::Open(f16);
  for (const std::string layer : {"hidden/layer_00", "hidden/layer_01", "hidden/layer_02"}) {
    EXPECT_EQ(b.OpenDataset(layer).ElementSize(), 2u);
    std::vector<float> full = a.OpenDataset(layer).ReadAll<float>();
    const std::vector<float> half = b.OpenDataset(layer).ReadAll<float>();
    const auto rounded = torch::from_blob(full.data(), {std::int64_t(full.size())})
                             .to(torch::kHalf)
                             .to(torch::kFloat);
    ASSERT_EQ(half.size(), full.size());
    EXPECT_TRUE(torch::equal(
        rounded, torch::from_blob(const_cast<float*>(half.data()), {std::int64_t(half.size())})))
        << layer;
  }
  for (const auto& name : kDatasets) {
    if (name.rfind("hidden/", 0) != 0 && name != "provenance/group_sha256") {
      EXPECT_EQ(a.OpenDataset(name).ReadAll<double>(), b.OpenDataset(name).ReadAll<double>())
          << name;
    }
  }
  EXPECT_NO_THROW(extract::VerifyRows(f16, "verify-inputs"));
  EXPECT_NE(a.GetString("content_sha256"), b.GetString("content_sha256"));
  const auto p = RunIclprobe(
      "probe -a " + f16 + " --targets xty --k 5 --quiet --verify-inputs --out " + (tmp / "p.h5"));
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(RunIclprobe(common + "--dtype float8 --out " + (tmp / "bad.h5")).exit_code, 2);
}

// A task family's draws are stored: each prompt's pool member (whose weights prompts/w are), and
// each prompt's noise sigma as a probe target of its own.
TEST_F(CliExtract, StoresWhatATaskFamilysPromptsDrew) {
  TempDir tmp;
  const std::string pool = tmp / "pool.h5", mix = tmp / "mix.h5";
  auto r = RunIclprobe("extract -c " + Ckpt() +
                       " --prompts 40 --task-family pool:5:2 --threads 1 --quiet --out " + pool);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const h5::File f = h5::File::Open(pool);
  const std::vector<double> member = f.OpenDataset("prompts/pool_member").ReadAll<double>();
  const std::vector<double> w = f.OpenDataset("prompts/w").ReadAll<double>();
  ASSERT_EQ(member.size(), 40u);
  data::TaskFamily family = data::ParseTaskFamily("pool:5:2");
  const arma::mat members = data::PoolMembers(family, 3, 3, 1.0);
  for (std::size_t i = 0; i < 40; ++i) {
    ASSERT_GE(member[i], 0);
    ASSERT_LT(member[i], 5);
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(w[i * 3 + j], members(j, arma::uword(member[i])));  // row-major [N, d]
  }
  EXPECT_EQ(extract::ReadActivationsInfo(pool).task.family, family);

  r = RunIclprobe("extract -c " + Ckpt() +
                  " --prompts 40 --task-family noise-mix:0.1,1 --threads 1 --quiet --out " + mix);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = extract::ReadActivationsInfo(mix);
  ASSERT_NE(std::find(info.targets.begin(), info.targets.end(), "sigma"), info.targets.end());
  for (double s : h5::File::Open(mix).OpenDataset("targets/sigma").ReadAll<double>())
    EXPECT_TRUE(s == 0.1 || s == 1.0) << s;
}
