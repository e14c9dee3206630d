// End to end: `iclprobe probe` on synthetic activations files with planted structure.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <sstream>

#include "analysis/report.hpp"
#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations_schema.hpp"
#include "probes/probes_file.hpp"
#include "probes/runner.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::CountLines;
using test::RunIclprobe;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int kN = 2000, kn = 3, kd = 2, kH = 8, kT = 2 * kn;

struct Synthetic {
  bool planted = true;  // layer 2 encodes xty linearly at the state after k examples
  int hidden = kH;
  int prompts = kN;
  bool nan_hidden = false;  // a NaN at prompt 5, position 1 of layer 1
  bool nan_target = false;  // a NaN in w_ols of prompt 7
  unsigned seed = 1;
  int prompt_seed = 1;  // the file's prompt-set seed
  bool y_only = false;  // positions "y": the y-tokens only (no x-token to read a query at)
};

// Writes a file with the layout iclprobe extract produces (only what probe reads).
void WriteActivations(const std::string& path, const Synthetic& s) {
  arma::arma_rng::set_seed(s.seed);
  const hsize_t N = s.prompts, H = s.hidden;
  h5::File f = h5::File::Create(path, true);
  data::WriteFormatAttrs(f, extract::schema::kFormat);  // the schema the reader checks
  f.SetAttr("model_config", "{\"d\":2,\"n_max\":3,\"layers\":2,\"hidden\":" + std::to_string(H) +
                                ",\"heads\":1,\"mlp_ratio\":4}");
  f.SetAttr("task_config", "{\"d\":2,\"n\":3,\"w_scale\":1.0,\"noise\":0.0,\"fixed_w\":false}");
  f.SetAttr("seed", s.prompt_seed);
  f.SetAttr("prompts", std::int64_t(N));
  f.SetAttr("n_complete", std::int64_t(N));
  f.SetAttr("checkpoint_sha256", std::string(64, '0'));
  f.SetAttr("positions", s.y_only ? "y" : "all");
  const hsize_t T = s.y_only ? kn : kT;
  f.SetAttr("layers", "[0,1,2]");
  arma::cube xty(kd, kn, N, arma::fill::randn), wols(kd, kn, N, arma::fill::randn);
  if (s.nan_target) wols(0, 1, 7) = arma::datum::nan;
  arma::cube xtx(kd * kd, kn, N, arma::fill::randn);
  for (hsize_t i = 0; i < N; ++i)
    for (int k = 0; k < kn; ++k)
      xtx(2, k, i) = xtx(1, k, i);  // symmetric 2x2
  f.CreateDataset<double>(extract::schema::kXty, {N, kn, kd}).Write(xty.memptr(), xty.n_elem);
  f.CreateDataset<double>(extract::schema::kWOls, {N, kn, kd}).Write(wols.memptr(), wols.n_elem);
  h5::Dataset dx = f.CreateDataset<double>(extract::schema::kXtx, {N, kn, kd, kd});
  dx.Write(xtx.memptr(), xtx.n_elem);
  dx.SetAttr("symmetric", 1);
  arma::mat a(H, kd, arma::fill::randn);
  for (int l = 0; l <= 2; ++l) {
    arma::cube h(H, T, N, arma::fill::randn);  // [N, T, H]
    if (l == 2 && s.planted && !s.y_only)
      for (hsize_t i = 0; i < N; ++i)
        for (int k = 1; k <= kn; ++k)
          h.slice(i).col(2 * k - 1) = a * xty.slice(i).col(k - 1) + 0.01 * arma::randn(H);
    if (l == 1 && s.nan_hidden) h(0, 1, 5) = arma::datum::nan;
    const arma::fcube hf = arma::conv_to<arma::fcube>::from(h);
    f.CreateDataset<float>(extract::schema::Hidden(l), {N, T, H}).Write(hf.memptr(), hf.n_elem);
  }
  f.CreateDataset<float>(extract::schema::kPredictions, {N, kn});
  f.CreateDataset<double>(extract::schema::kPromptsX, {N, kn, kd});
}

// (target, probe, source, layer, k, seed) -> r2; checks each row's interval columns.
std::map<std::string, double> ReadR2(const std::string& csv) {
  std::map<std::string, double> out;
  std::istringstream in(test::ReadFile(csv));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "target,probe,source,layer,k,seed,mse,nmse,r2,r2_lo,r2_hi,nmse_lo,nmse_hi");
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');)
      f.push_back(x);
    EXPECT_EQ(f.size(), 13u) << line;
    if (f.size() != 13) continue;
    const double r2 = std::stod(f[8]), lo = std::stod(f[9]), hi = std::stod(f[10]);
    EXPECT_LE(lo, hi) << line;
    // nMSE = 1 - R2 on every resample, so its interval is R2's mirrored; the CSV prints 9
    // significant digits (half a unit of the 9th: 5e-9 relative) of both numbers.
    const double tol_hi = 5e-9 * (std::abs(hi) + std::abs(1.0 - hi)) + 1e-15;
    const double tol_lo = 5e-9 * (std::abs(lo) + std::abs(1.0 - lo)) + 1e-15;
    EXPECT_NEAR(std::stod(f[11]), 1.0 - hi, tol_hi) << line;
    EXPECT_NEAR(std::stod(f[12]), 1.0 - lo, tol_lo) << line;
    out[f[0] + "," + f[1] + "," + f[2] + "," + f[3] + "," + f[4] + "," + f[5]] = r2;
  }
  return out;
}

// acts.h5 with xty planted at layer 2, and acts_init.h5, its control, with nothing planted.
void WriteModelAndControl(const TempDir& tmp) {
  WriteActivations(tmp / "acts.h5", {});
  Synthetic control;
  control.planted = false;
  control.seed = 2;
  WriteActivations(tmp / "acts_init.h5", control);
}

}  // namespace

TEST(CliProbe, RidgeFindsThePlantedLayerAndControlsDoNot) {
  TempDir tmp;
  WriteModelAndControl(tmp);
  const auto r =
      RunIclprobe("probe -a " + (tmp / "acts.h5") + " --control " + (tmp / "acts_init.h5") +
                  " --targets xty,w_ols,xtx --probes ridge --shuffle-control --seeds 2 --threads 2 "
                  "--quiet --out " +
                  (tmp / "probes.h5") + " --csv " + (tmp / "probes.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto r2 = ReadR2(tmp / "probes.csv");
  EXPECT_EQ(r2.size(), 3u * 3 * 3 * 3 * 2);  // targets x sources x layers x k x seeds
  for (int k = 1; k <= 3; ++k)
    for (int s = 0; s < 2; ++s) {
      const std::string ks = "," + std::to_string(k) + "," + std::to_string(s);
      EXPECT_GT(r2["xty,ridge,model,2" + ks], 0.999) << k;
      // Where nothing is encoded, test R2 is 0 up to the sampling error of 200 test prompts.
      EXPECT_LT(std::abs(r2["xty,ridge,model,0" + ks]), 0.1) << k;
      EXPECT_LT(std::abs(r2["xty,ridge,acts_init,2" + ks]), 0.1) << k;
      EXPECT_LT(std::abs(r2["xty,ridge,shuffled,2" + ks]), 0.1) << k;
      EXPECT_LT(std::abs(r2["w_ols,ridge,model,2" + ks]), 0.1) << k;  // not encoded
    }
  const h5::File f = h5::File::Open(tmp / "probes.h5");
  EXPECT_EQ(f.GetString("format"), "iclprobe-probes");
  EXPECT_EQ(f.OpenDataset("metrics/xty/ridge/model/r2").dims(), (h5::Dims{3, 3, 2}));
  EXPECT_EQ(f.OpenDataset("ridge/xtx/model/weights").dims(),
            (h5::Dims{3, 3, 2, 8, 3}));  // upper triangle of 2x2
  const auto sel = f.OpenDataset("selectivity/xty/ridge/acts_init").ReadAll<double>();
  EXPECT_GT(sel[(2 * 3 + 2) * 2 + 0], 0.95);  // layer index 2, k index 2, seed 0
  EXPECT_TRUE(f.Exists("selectivity/xty/ridge/shuffled"));
  EXPECT_EQ(f.OpenDataset("ridge/xty/model/lambda").dims(), (h5::Dims{3, 3, 2}));
}

TEST(CliProbe, GradientProbesRunAndSaveTheirPoolingWeights) {
  TempDir tmp;
  WriteActivations(tmp / "acts.h5", {});
  const auto r = RunIclprobe("probe -a " + (tmp / "acts.h5") +
                             " --targets xty --probes linear,mlp --layers 2 "
                             "--epochs 40 --mlp-hidden 32 --threads 2 --quiet --out " +
                             (tmp / "p.h5") + " --csv " + (tmp / "p.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto r2 = ReadR2(tmp / "p.csv");
  EXPECT_GT(r2["xty,linear,model,2,3,0"], 0.95);
  EXPECT_GT(r2["xty,mlp,model,2,3,0"], 0.8);
  const h5::File f = h5::File::Open(tmp / "p.h5");
  const auto alpha = f.OpenDataset("alpha/xty/linear/model").ReadAll<double>();  // [1, 3, 1, 6]
  ASSERT_EQ(alpha.size(), 18u);
  // k = 3: weights over positions 0..5 sum to 1 and peak at the state after 3 examples (5).
  double sum = 0;
  for (int t = 0; t < 6; ++t)
    sum += alpha[12 + t];
  // alpha is a float32 softmax (u = 6e-8) over 6 positions, summed here in double: the float32
  // row sum and the normalisation give |sum - 1| <= ~(6 + 2) * u = 5e-7 < 1e-6.
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(std::max_element(alpha.begin() + 12, alpha.begin() + 18) - (alpha.begin() + 12), 5);
  EXPECT_EQ(alpha[6 + 4], 0.0);  // k = 2 sees positions 0..3 only (stored as exact zeros)
}

TEST(CliProbe, BadInputIsOneLineExitTwoAndNoOutput) {
  TempDir tmp;
  WriteActivations(tmp / "acts.h5", {});
  Synthetic wide;
  wide.hidden = 12;
  WriteActivations(tmp / "wide.h5", wide);
  Synthetic nan_h;
  nan_h.nan_hidden = true;
  WriteActivations(tmp / "nan_h.h5", nan_h);
  Synthetic nan_t;
  nan_t.nan_target = true;
  WriteActivations(tmp / "nan_t.h5", nan_t);
  Synthetic few;
  few.prompts = 10;
  WriteActivations(tmp / "few.h5", few);
  Synthetic other_prompts;
  other_prompts.prompt_seed = 2;
  WriteActivations(tmp / "other_prompts.h5", other_prompts);
  Synthetic y_only;
  y_only.y_only = true;
  WriteActivations(tmp / "y_only.h5", y_only);
  const std::string out = tmp / "probes.h5";
  const std::string a = " -a " + (tmp / "acts.h5");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {a + " --targets xty,moments", "--targets: 'moments' is not in"},
      {a + " --control " + (tmp / "wide.h5"), "has hidden 12 but"},
      {" -a " + (tmp / "nan_h.h5") + " --layers 1", "non-finite value at prompt 5, position 1"},
      {" -a " + (tmp / "nan_t.h5") + " --targets w_ols",
       "/targets/w_ols has a non-finite value at prompt 7"},
      {a + " --split 1,0,0", "--split"},
      {a + " --split 0.8,0.1", "--split: expected three"},
      {" -a " + (tmp / "few.h5") + " --lambdas 0,1", "--lambdas: 0 is in the grid"},
      {a + " --probes ridge,forest", "--probes: unknown probe 'forest'"},
      {a + " --lambdas 1:0.5:3", "--lambdas"},
      {a + " --layers 7", "--layers: layer 7 is not stored"},
      {a + " --k 4", "--k: 4 is outside 1..3"},
      // Model and control are paired prompt by prompt: the same prompt set, the same count.
      {a + " --control " + (tmp / "other_prompts.h5"), "--control: '"},
      {a + " --control " + (tmp / "few.h5"), "controls must hold the same prompts"},
      {a + " --max-prompts 5000", "--max-prompts: 5000 is more than the 2000 prompts"},
      {a + " --max-prompts -1", "--max-prompts"},
      {a + " --bootstrap 5", "--bootstrap: must be 100..100000"},
      {" -a " + (tmp / "none.h5"), "no such file"},
      // The query of example k+1 is its x-token: none in a y-only file, none after k = n.
      {" -a " + (tmp / "y_only.h5") + " --at query", "--at: query reads the x-token"},
      {a + " --at both --k 1,3", "--k: k=3 = n has no query token"},
      {a + " --at sideways", "--at: expected state, query or both"},
      {a + " --targets xty.query", "--targets: 'xty.query' ends in '.query'"},
      // Codelength schedules: increasing fractions ending at 1, no empty block.
      {a + " --codelength --codelength-blocks 0.5,0.25,1",
       "--codelength-blocks: the fractions "
       "must increase strictly"},
      {a + " --codelength --codelength-blocks 0.1,0.5",
       "--codelength-blocks: the last fraction "
       "must be 1"},
      {a + " --codelength --codelength-blocks 0.01,0.0102,1", "has no rows"},
      {a + " --codelength --codelength-blocks 0.1,x,1", "--codelength-blocks: expected a comma"},
      {a + " --codelength-blocks 0.1,1", "--codelength-blocks: only with --codelength"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("probe --quiet --threads 1" + args + " --out " + out + " --csv " +
                               (tmp / "p.csv"));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
    EXPECT_FALSE(fs::exists(out + ".partial")) << args;
    EXPECT_FALSE(fs::exists(tmp / "p.csv")) << args;
  }
  ASSERT_EQ(RunIclprobe("probe --quiet" + a + " --out " + out).exit_code, 0);
  const auto again = RunIclprobe("probe --quiet" + a + " --out " + out);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos);
  // A probes file is not an activations file.
  const auto wrong = RunIclprobe("probe --quiet -a " + out + " --out " + (tmp / "x.h5"));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("expected 'iclprobe-activations'"), std::string::npos) << wrong.err;
}

TEST(CliProbe, GradientProbesDoNotDependOnTheThreadCount) {
  TempDir tmp;
  WriteActivations(tmp / "acts.h5", {});
  for (const char* t : {"1", "2"}) {
    const auto r = RunIclprobe("probe -a " + (tmp / "acts.h5") +
                               " --targets xty,w_ols --probes linear,mlp --layers 1,2 "
                               "--epochs 3 --mlp-hidden 16 --quiet --threads " +
                               std::string(t) + " --out " + (tmp / ("p" + std::string(t) + ".h5")) +
                               " --csv " + (tmp / ("p" + std::string(t) + ".csv")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Exact by construction (probes/runner.cpp, probes/gradient.cpp): --threads only sets how many
  // probes are fit at once. Each probe is fit start to finish on one thread with torch intra-op
  // and OpenBLAS threads set to 1 (RunProbes), from parameters initialised under a lock from its
  // own seed and batches shuffled by its own generator, on the same tensor shapes; records are
  // sorted into a fixed order before writing. So every probe's float32 arithmetic is the same
  // instruction sequence whatever the thread count (same machine, same binary).
  EXPECT_EQ(test::ReadFile(tmp / "p1.csv"), test::ReadFile(tmp / "p2.csv"));
}

// Ridge probes stream the file in blocks; with more than one worker the next block is read on a
// thread of its own while the workers fit this one (probes/runner.cpp, StreamBlocks). Each
// (k, seed) statistic is still summed by one task per block, in block order, so the results are
// the same bit for bit on 1 and 2 threads; blocks of 300 rows make 7 blocks of the 2,000 prompts.
// The second pass reads the probed positions kept from the first (one read of the file) or, with
// no memory for them, the file again: the same floats in the same blocks, so the same bits.
TEST(CliProbe, RidgeProbesDoNotDependOnTheThreadCountOrOnKeepingTheStates) {
  TempDir tmp;
  WriteActivations(tmp / "acts.h5", {});
  std::vector<probes::ProbeOutput> outs;
  for (const auto& [threads, keep] : std::vector<std::pair<int, std::int64_t>>{
           {1, std::int64_t(1) << 30}, {2, std::int64_t(1) << 30}, {2, 0}, {1, 0}}) {
    probes::ProbeRequest req;
    req.activations = tmp / "acts.h5";
    req.targets = {"xty", "xtx"};
    req.seeds = 2;
    req.block_rows = 300;
    req.bootstrap = 100;
    req.ridge_keep_bytes = keep;
    core::ThreadPool pool(threads);
    outs.push_back(probes::RunProbes(probes::PlanProbes(req), pool));
  }
  for (std::size_t o = 1; o < outs.size(); ++o) {
    SCOPED_TRACE("run " + std::to_string(o));
    ASSERT_EQ(outs[0].records.size(), outs[o].records.size());
    ASSERT_EQ(outs[0].records.size(), 2u * 3 * 3 * 2);  // targets x layers x k x seeds
    for (std::size_t i = 0; i < outs[0].records.size(); ++i) {
      const auto &a = outs[0].records[i], &b = outs[o].records[i];
      EXPECT_EQ(a.mse, b.mse) << i;
      EXPECT_EQ(a.lambda, b.lambda) << i;
      EXPECT_TRUE(arma::approx_equal(a.sse, b.sse, "absdiff", 0.0)) << i;
    }
    ASSERT_EQ(outs[0].ridge.size(), outs[o].ridge.size());
    for (std::size_t i = 0; i < outs[0].ridge.size(); ++i)
      EXPECT_TRUE(
          arma::approx_equal(outs[0].ridge[i].weights, outs[o].ridge[i].weights, "absdiff", 0.0))
          << i;
  }
}

// The same states and targets handed over in memory (MemorySource, what the Python module
// passes) give the file run's numbers bit for bit: the runner reads the same floats in the same
// blocks, so every sum is the same. Includes a control, the shuffle control and two seeds.
TEST(CliProbe, RidgeOnStatesInMemoryEqualsTheFileRunExactly) {
  TempDir tmp;
  WriteModelAndControl(tmp);
  probes::ProbeRequest req;
  req.activations = tmp / "acts.h5";
  req.controls = {tmp / "acts_init.h5"};
  req.targets = {"xty", "w_ols"};
  req.shuffle_control = true;
  req.seeds = 2;
  req.block_rows = 300;
  req.bootstrap = 100;
  core::ThreadPool pool(2);
  const probes::ProbePlan file_plan = probes::PlanProbes(req);
  const probes::ProbeOutput from_file = probes::RunProbes(file_plan, pool);

  std::vector<probes::StatesInfo> infos = file_plan.infos;
  std::vector<std::shared_ptr<const probes::MemorySource>> memory;
  std::deque<arma::fmat> states;  // read where they lie: they outlive the run
  for (auto& info : infos) {
    auto m = std::make_shared<probes::MemorySource>();
    for (int l : info.layers) {
      const arma::fmat& s =
          states.emplace_back(extract::HiddenReader(*info.file, l).Read(0, info.prompts));
      m->hidden[l] = {s.memptr(), std::int64_t(s.n_rows)};
    }
    for (const auto& t : info.targets)
      m->targets[t] = probes::LoadTarget(info, t);
    memory.push_back(m);
    info.name = fs::path(info.name).stem().string();  // names only: nothing is read from a file
  }
  probes::ProbeRequest mreq = req;
  mreq.activations = infos[0].name;
  mreq.controls = {infos[1].name};
  const probes::ProbeOutput in_memory =
      probes::RunProbes(probes::PlanProbesInMemory(mreq, infos, memory), pool);

  ASSERT_EQ(from_file.records.size(), in_memory.records.size());
  ASSERT_EQ(from_file.records.size(),
            2u * 3 * 3 * 3 * 2);  // targets x sources x layers x k x seeds
  for (std::size_t i = 0; i < from_file.records.size(); ++i) {
    const auto &a = from_file.records[i], &b = in_memory.records[i];
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.r2, b.r2) << i;
    EXPECT_EQ(a.r2_lo, b.r2_lo) << i;
    EXPECT_EQ(a.lambda, b.lambda) << i;
    EXPECT_TRUE(arma::approx_equal(a.sse, b.sse, "absdiff", 0.0)) << i;
  }
  ASSERT_EQ(from_file.ridge.size(), in_memory.ridge.size());
  for (std::size_t i = 0; i < from_file.ridge.size(); ++i)
    EXPECT_TRUE(
        arma::approx_equal(from_file.ridge[i].weights, in_memory.ridge[i].weights, "absdiff", 0.0))
        << i;

  // Its results as a probes file's, with no file: what the file's writer writes and its reader
  // reads back, so equal to the file of the file run.
  const std::string path = tmp / "probes.h5";
  probes::WriteProbesFile(path, req, from_file);
  const probes::ProbeResults disk = probes::ReadProbesFile(path);
  const probes::ProbeResults mem = probes::ProbeResultsInMemory(mreq, in_memory, infos[0]);
  EXPECT_EQ(disk.targets, mem.targets);
  EXPECT_EQ(disk.sources, mem.sources);
  EXPECT_EQ(disk.layers, mem.layers);
  EXPECT_EQ(disk.ks, mem.ks);
  EXPECT_EQ(disk.task_config, mem.task_config);
  EXPECT_EQ(disk.n_test, mem.n_test);
  ASSERT_EQ(disk.metric.size(), mem.metric.size());
  for (const auto& [key, c] : disk.metric)
    EXPECT_TRUE(arma::approx_equal(c, mem.metric.at(key), "absdiff", 0.0)) << key;
  ASSERT_EQ(disk.sse.size(), mem.sse.size());
  for (const auto& [key, cells] : disk.sse)
    for (std::size_t i = 0; i < cells.size(); ++i)
      EXPECT_TRUE(arma::approx_equal(cells[i], mem.sse.at(key)[i], "absdiff", 0.0)) << key;
  const auto onsets_disk = analysis::FindOnsets(disk, 3, {});
  const auto onsets_mem = analysis::FindOnsets(mem, 3, {});
  ASSERT_EQ(onsets_disk.size(), onsets_mem.size());
  for (std::size_t i = 0; i < onsets_disk.size(); ++i) {
    EXPECT_EQ(onsets_disk[i].layer, onsets_mem[i].layer);
    EXPECT_EQ(onsets_disk[i].at_onset.lo, onsets_mem[i].at_onset.lo);
  }
  const probes::RidgeReadout rd = probes::ReadRidgeReadout(disk, "xty", 2, 3, 1);
  const probes::RidgeReadout rm = probes::ReadRidgeReadout(mem, "xty", 2, 3, 1);
  EXPECT_TRUE(arma::approx_equal(rd.weights, rm.weights, "absdiff", 0.0));

  // A memory source that lacks a layer its description names is the caller's bug.
  auto partial = std::make_shared<probes::MemorySource>(*memory[0]);
  partial->hidden.erase(2);
  probes::ProbeRequest one = mreq;
  one.controls.clear();
  EXPECT_THROW(probes::PlanProbesInMemory(one, {infos[0]}, {partial}), std::logic_error);
}

// --max-prompts N probes the first N prompts of a file: the same numbers as a file of exactly
// those prompts (prompt i depends only on the seed and i, and extract's datasets do not depend
// on the batch), so the CSVs are byte-identical.
TEST(CliProbe, MaxPromptsEqualsAFileOfThoseFirstPrompts) {
  TempDir tmp;
  auto ok = [](const test::CommandResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  ok(RunIclprobe("construct --program gd --d 2 --n 3 --out " + (tmp / "gd.h5")));
  ok(RunIclprobe("extract -c " + (tmp / "gd.h5") + " --prompts 400 --threads 1 --quiet --out " +
                 (tmp / "big.h5")));
  ok(RunIclprobe("extract -c " + (tmp / "gd.h5") +
                 " --prompts 250 --batch 37 --threads 1 --quiet --out " + (tmp / "small.h5")));
  ok(RunIclprobe("probe -a " + (tmp / "big.h5") +
                 " --max-prompts 250 --targets xty --probes ridge --threads 1 --quiet --out " +
                 (tmp / "p1.h5") + " --csv " + (tmp / "p1.csv")));
  ok(RunIclprobe("probe -a " + (tmp / "small.h5") +
                 " --targets xty --probes ridge --threads 1 --quiet --out " + (tmp / "p2.h5") +
                 " --csv " + (tmp / "p2.csv")));
  EXPECT_EQ(test::ReadFile(tmp / "p1.csv"), test::ReadFile(tmp / "p2.csv"));
  EXPECT_EQ(h5::File::Open(tmp / "p1.h5").OpenDataset("splits/seed_0").dims()[0], 250u);
}

// Online codelength (MDL): layer 2 carries xty linearly (to 1% noise), layers 0 and 1 are
// random, as is every layer of the control. The code of a random layer is the code without
// features to within the regret of its useless weights; the planted layer's is far shorter.
TEST(CliProbe, CodelengthIsShortWhereTheTargetIsPlantedAndItsGapToTheControlShowsIt) {
  TempDir tmp;
  WriteModelAndControl(tmp);
  const auto r =
      RunIclprobe("probe -a " + (tmp / "acts.h5") + " --control " + (tmp / "acts_init.h5") +
                  " --targets xty --probes ridge,linear --epochs 20 --codelength --quiet "
                  "--threads 2 "
                  "--out " +
                  (tmp / "probes.h5") + " --csv " + (tmp / "probes.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const probes::ProbeResults f = probes::ReadProbesFile(tmp / "probes.h5");
  ASSERT_EQ(f.code_fractions, probes::DefaultCodelengthFractions());
  const arma::cube& bits = *f.Find("xty", "ridge", "model", "code_bits");
  const arma::cube& uniform = *f.Find("xty", "ridge", "model", "uniform_bits");
  // (This fixture's control holds other random targets than the model's file, unlike a real
  // control; each is compared with its own code without features.)
  const arma::cube gain = *f.Find("xty", "ridge", "model", "uniform_bits") - bits;
  const arma::cube control_gain = *f.Find("xty", "ridge", "acts_init", "uniform_bits") -
                                  *f.Find("xty", "ridge", "acts_init", "code_bits");
  // 1,600 training prompts, m = 2 entries, H = 8 features: a random layer's code exceeds the
  // code without features by at most the regret of H useless weights per entry,
  // m (H / 2) log2(1600) = 85 bits, plus log2(20 penalties) per block and entry (86 bits).
  const double n_train = 1600,
               regret = 2 * (8 / 2.0) * std::log2(n_train) + 2 * 10 * std::log2(20.0);
  for (int ki = 0; ki < 3; ++ki) {
    for (int li : {0, 1}) {
      EXPECT_LT(bits(0, ki, li) - uniform(0, ki, li), regret) << "layer " << li << " k " << ki;
      EXPECT_GT(bits(0, ki, li) - uniform(0, ki, li), -regret) << "layer " << li << " k " << ki;
      EXPECT_LT(std::abs(control_gain(0, ki, li) - gain(0, ki, li)), 2 * regret);
    }
    // Layer 2: h = A xty + 0.01 noise, so xty is known to about 1% of its sd; each entry costs
    // log2(sd / residual sd) ~ log2(100) = 6.6 bits less than without the state, over the
    // ~1,598 coded rows of 2 entries: at least 10,000 bits shorter, and the control gains nothing.
    EXPECT_GT(gain(0, ki, 2), 10000) << "k " << ki;
    EXPECT_GT(gain(0, ki, 2) - control_gain(0, ki, 2), 10000) << "k " << ki;
  }
  // The linear probe's code (Adam on each prefix, a Gaussian of its validation error). The ridge
  // code is the Bayes code of this planted linear-Gaussian data, within the regret of the best
  // linear-Gaussian code in hindsight, which no sequence of linear predictors beats: the linear
  // code is no shorter than the ridge code less that regret. Where nothing is planted it gains
  // less than the regret; at layer 2 a probe of R2 0.99 codes the last block (800 rows, 2
  // entries) alone at 800 x 2 x (1/2) log2(100) = 5,300 bits below the code without features.
  const arma::cube& linear_bits = *f.Find("xty", "linear", "model", "code_bits");
  const arma::cube linear_gain = *f.Find("xty", "linear", "model", "uniform_bits") - linear_bits;
  const arma::cube linear_control_gain = *f.Find("xty", "linear", "acts_init", "uniform_bits") -
                                         *f.Find("xty", "linear", "acts_init", "code_bits");
  for (int ki = 0; ki < 3; ++ki) {
    for (int li : {0, 1, 2})
      EXPECT_GT(linear_bits(0, ki, li), bits(0, ki, li) - regret) << "layer " << li << " k " << ki;
    for (int li : {0, 1})
      EXPECT_LT(linear_gain(0, ki, li), regret) << "layer " << li;
    EXPECT_GT(linear_gain(0, ki, 2), 5000) << "k " << ki;
    EXPECT_GT(linear_gain(0, ki, 2) - linear_control_gain(0, ki, 2), 5000) << "k " << ki;
  }
  // The CSV carries the same numbers (10 significant digits) for the ridge rows.
  std::istringstream in(test::ReadFile(tmp / "probes.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "target,probe,source,layer,k,seed,mse,nmse,r2,r2_lo,r2_hi,nmse_lo,nmse_hi,"
            "code_bits,uniform_bits");
  int rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');)
      c.push_back(x);
    ASSERT_EQ(c.size(), 15u) << line;
    if (c[2] != "model" || c[1] != "ridge") continue;
    const int layer = std::stoi(c[3]), k = std::stoi(c[4]);
    EXPECT_NEAR(std::stod(c[13]), bits(0, k - 1, layer), 1e-9 * bits(0, k - 1, layer));
    ++rows;
  }
  EXPECT_EQ(rows, 9);
  // report prints the codelength table with the gap to the control.
  const auto rep = RunIclprobe("report --probes " + (tmp / "probes.h5") + " --k 1,3");
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("online codelength of the ridge probe"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("gap acts_init k=3"), std::string::npos) << rep.out;
}
