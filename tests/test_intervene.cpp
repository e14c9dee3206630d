// iclprobe intervene: ground truth on the constructed gd model, whose layout says where X'y is
// written and how the prediction reads it, and the documented errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/hdf5.hpp"
#include "intervene/intervene.hpp"
#include "probes/probes_file.hpp"
#include "test_util.hpp"

namespace icl {
namespace {

using test::RunIclprobe;
using test::TempDir;

test::CommandResult Ok(const test::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r;
}

// One gd model (alpha 0.05, d = 3, n = 6), its activations and ridge probes of X'y, shared by
// the tests of this file.
class InterveneGd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    Ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + At("gd.h5")));
    Ok(RunIclprobe("extract -c " + At("gd.h5") + " --prompts 2000 --threads 1 --quiet --out " +
                   At("acts.h5")));
    Ok(RunIclprobe("probe -a " + At("acts.h5") +
                   " --targets xty --probes ridge --k 3,5 --threads 1 --quiet --out " +
                   At("probes.h5")));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string At(const std::string& name) { return *dir_ / name; }
  static TempDir* dir_;
};
TempDir* InterveneGd::dir_ = nullptr;

// Block 2 writes X'y into the rows `xty` at the y-token of example k and at the next x-token;
// block 3 forms the prediction 2 alpha x_q^T X'y from the x-token's own copy. So an edit of the
// state after block 2 that moves the probe's reading by dv, added at both positions, changes
// the prediction by 2 alpha x_q^T dv: slope 1, up to the mul primitive's error (the required
// bound 0.02). Added at the y-token alone it changes nothing the prediction reads (slope 0),
// and after block 3 the prediction is already formed (slope 0). An edit of the same norm in a
// random direction is uncorrelated with the predicted change: its interval holds 0.
TEST_F(InterveneGd, SlopeIsOneWhereTheConstructionWritesXtyAndZeroWhereItIsNotRead) {
  Ok(RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("probes.h5") +
                 " --target xty --response gd:0.05 --layers 2,3 --k 3,5 --pairs 400 --span "
                 "through-query --threads 1 --quiet --out " +
                 At("through.h5")));
  const auto through = intervene::ReadInterventionsFile(At("through.h5"));
  ASSERT_EQ(through.layers, (std::vector<int>{2, 3}));
  for (std::size_t ki = 0; ki < 2; ++ki) {
    const auto& at2 = through.Cell(0, ki);
    EXPECT_NEAR(at2.slope(0), 1.0, 0.02) << "k = " << at2.k;
    EXPECT_GT(at2.correlation(0), 0.99) << "k = " << at2.k;
    EXPECT_LE(at2.slope_lo(1), 0.0) << "random control, k = " << at2.k;
    EXPECT_GE(at2.slope_hi(1), 0.0) << "random control, k = " << at2.k;
    EXPECT_NEAR(through.Cell(1, ki).slope(0), 0.0, 0.02) << "after block 3, k = " << at2.k;
  }
  Ok(RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("probes.h5") +
                 " --target xty --response gd:0.05 --layers 2 --k 3 --pairs 200 --threads 1 "
                 "--quiet --out " +
                 At("probed.h5")));
  const auto probed = intervene::ReadInterventionsFile(At("probed.h5"));
  EXPECT_NEAR(probed.Cell(0, 0).slope(0), 0.0, 0.02);
  // The CSV has a row per (layer, k, control).
  const std::string csv = test::ReadFile(At("through.csv"));
  EXPECT_EQ(test::CountLines(csv), 1 + 2 * 2 * 2);
  EXPECT_EQ(csv.rfind("target,response,span,metric,layer,k,control,pairs,slope,", 0), 0u);
  // report draws the slopes next to the probe R2.
  const auto rep = Ok(RunIclprobe("report --probes " + At("probes.h5") + " --k 5 --interventions " +
                                  At("through.h5") + " --plot-dir " + At("figs")));
  EXPECT_NE(rep.out.find("intervene: target xty"), std::string::npos) << rep.out;
  if (rep.err.find("gnuplot not found") == std::string::npos) {
    EXPECT_TRUE(std::filesystem::exists(At("figs/intervene_xty_through-query_k3.png")));
    EXPECT_TRUE(std::filesystem::exists(At("figs/intervene_xty_through-query_k5.svg")));
  }
}

// A learner target is a weight target like w_ols: on gd:3 (alpha 0.02, d = 3,
// n = 6) the iterate w_3 is written into the rows w by block 4, at the y-token of example k and
// at the next x-token, and block 5 predicts x_q^T w_3 from the x-token's copy: an edit after
// block 4 through the query moves the prediction by x_q^T dw (slope 1, up to the mul's error),
// and after block 5 by nothing.
TEST(InterveneLearnerTarget, SlopeIsOneWhereTheIterateIsReadAndZeroAfter) {
  TempDir tmp;
  Ok(RunIclprobe("construct --program gd:3 --alpha 0.02 --d 3 --n 6 --out " + (tmp / "g.h5")));
  Ok(RunIclprobe("extract -c " + (tmp / "g.h5") +
                 " --prompts 2000 --threads 1 --quiet --learner-targets gd:0.02:3 --out " +
                 (tmp / "a.h5")));
  Ok(RunIclprobe("probe -a " + (tmp / "a.h5") +
                 " --targets w_gd_0.02_3 --probes ridge --k 3,5 --layers 4,5 --threads 1 --quiet "
                 "--out " +
                 (tmp / "p.h5")));
  EXPECT_EQ(probes::ReadProbesFile(tmp / "p.h5").learner_targets.at("w_gd_0.02_3"), "gd:0.02:3");
  Ok(RunIclprobe("intervene -c " + (tmp / "g.h5") + " --probes " + (tmp / "p.h5") +
                 " --target w_gd_0.02_3 --layers 4,5 --k 3,5 --pairs 300 --span through-query "
                 "--threads 1 --quiet --out " +
                 (tmp / "i.h5")));
  const auto r = intervene::ReadInterventionsFile(tmp / "i.h5");
  for (std::size_t ki = 0; ki < 2; ++ki) {
    EXPECT_NEAR(r.Cell(0, ki).slope(0), 1.0, 0.02) << "after block 4, k index " << ki;
    EXPECT_NEAR(r.Cell(1, ki).slope(0), 0.0, 0.02) << "after block 5, k index " << ki;
  }
  // A w_ name the probes file has no learner for is refused.
  const auto bad = RunIclprobe("intervene -c " + (tmp / "g.h5") + " --probes " + (tmp / "p.h5") +
                               " --target w_gd_0.5 --pairs 10 --quiet --out " + (tmp / "j.h5"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(tmp / "j.h5"));
}

// The decoy (as in experiments/power.sh): gd with an unused copy decoy_xty = M X'y, rotated. A
// probe fitted within the decoy's rows alone reads X'y exactly (M is invertible: R2 >= 0.999)
// and its edit, kept inside those rows, moves nothing (slope interval within +-0.05 of 0; the
// float32 rounding of the rotated weights leaves ~1e-6); the same within the used rows moves the
// prediction as GD would (slope 1 up to the mul's error, 0.02). The whole state's ridge probe
// reads both copies, and its covariance-metric edit moves both (slope 1), which is why the test
// uses the decoy-only probe.
TEST(InterveneDecoy, AnEditWithinTheDecoyMovesNothingAndOneWithinTheUsedCopyMovesAsGd) {
  TempDir tmp;
  Ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --decoy xty --rotate 7 --out " +
                 (tmp / "g.h5")));
  Ok(RunIclprobe("extract -c " + (tmp / "g.h5") + " --prompts 2000 --threads 1 --quiet --out " +
                 (tmp / "a.h5")));
  Ok(RunIclprobe("probe -a " + (tmp / "a.h5") +
                 " --targets xty --probes ridge --k 3,5 --layers 2 --threads 1 --quiet --out " +
                 (tmp / "p.h5")));
  const std::string base = "intervene -c " + (tmp / "g.h5") + " --probes " + (tmp / "p.h5") +
                           " --target xty --response gd:0.05 --layers 2 --k 3,5 --pairs 400 "
                           "--span through-query --threads 1 --quiet";
  Ok(RunIclprobe(base + " --within decoy_xty --out " + (tmp / "decoy.h5")));
  Ok(RunIclprobe(base + " --within xty --out " + (tmp / "used.h5")));
  Ok(RunIclprobe(base + " --out " + (tmp / "whole.h5")));
  const auto decoy = intervene::ReadInterventionsFile(tmp / "decoy.h5");
  const auto used = intervene::ReadInterventionsFile(tmp / "used.h5");
  const auto whole = intervene::ReadInterventionsFile(tmp / "whole.h5");
  EXPECT_EQ(decoy.request.within_name, "decoy_xty");
  EXPECT_EQ(whole.request.within_name, "");
  for (std::size_t ki = 0; ki < 2; ++ki) {
    SCOPED_TRACE("k = " + std::to_string(decoy.ks[ki]));
    const auto& d = decoy.Cell(0, ki);
    EXPECT_GE(d.probe_r2, 0.999);
    EXPECT_GE(d.slope_lo(0), -0.05);
    EXPECT_LE(d.slope_hi(0), 0.05);
    EXPECT_NEAR(used.Cell(0, ki).slope(0), 1.0, 0.02);
    EXPECT_NEAR(whole.Cell(0, ki).slope(0), 1.0, 0.02);
  }
  // The basis is kept: [H, r = d], orthonormal columns.
  const h5::Dataset ds = h5::File::Open(tmp / "decoy.h5").OpenDataset("within");
  ASSERT_EQ(ds.dims().size(), 2u);
  ASSERT_EQ(ds.dims()[1], 3u);
  const std::vector<double> v = ds.ReadAll<double>();
  const arma::mat basis = arma::mat(v.data(), 3, ds.dims()[0]).t();  // row-major [H, r]
  EXPECT_LE(arma::norm(basis.t() * basis - arma::eye(3, 3), "inf"), 1e-12);
  // A name the construction lacks, and a probe within a subspace under the standardized metric.
  test::ExpectEachRefused(
      {{base + " --within nosuch", "--within: 'nosuch' is not a quantity of"},
       {base + " --within xty --metric standardized", "--within: a probe within a subspace"}},
      " --out " + (tmp / "bad.h5"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "bad.h5"));
}

// The documented errors: one line naming what is wrong, exit 2, no output left behind.
TEST_F(InterveneGd, RefusesProbesOfAnotherCheckpointAndWhatTheProbesFileLacks) {
  Ok(RunIclprobe("construct --program gd --alpha 0.1 --d 3 --n 6 --out " + At("other.h5")));
  Ok(RunIclprobe("probe -a " + At("acts.h5") +
                 " --targets xty --probes linear --k 3 --layers 2 --epochs 1 --threads 1 --quiet "
                 "--out " +
                 At("linear.h5")));
  const std::string base = "intervene --threads 1 --quiet --pairs 20 --out " + At("bad.h5");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"-c " + At("other.h5") + " --probes " + At("probes.h5") + " --target xty",
       "not this checkpoint"},
      {"-c " + At("gd.h5") + " --probes " + At("probes.h5") + " --target w_ols",
       "has no probes of target 'w_ols'"},
      {"-c " + At("gd.h5") + " --probes " + At("probes.h5") + " --target xty --layers 7",
       "has no probes of layer 7"},
      {"-c " + At("gd.h5") + " --probes " + At("probes.h5") + " --target xty --k 4",
       "has no probes at k = 4"},
      {"-c " + At("gd.h5") + " --probes " + At("linear.h5") + " --target xty",
       "has no ridge probe of 'xty'"},
      {"-c " + At("gd.h5") + " --probes " + At("probes.h5") + " --target xty --response gd:-1",
       "--response"},
      {"-c " + At("gd.h5") + " --probes " + At("probes.h5") + " --target xtx",
       "expected w_ols, w_ridge, w, xty or a learner target"},
      {"-c " + At("gd.h5") + " --probes " + At("acts.h5") + " --target xty", "acts.h5"},
  };
  for (const auto& c : cases) {
    const auto r = RunIclprobe(base + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(At("bad.h5"))) << c.args;
    EXPECT_FALSE(std::filesystem::exists(At("bad.csv"))) << c.args;
  }
}

// Hostile files: a NaN in a probe's weights or in an interventions file is refused by the
// reader, not carried into slopes or plots.
TEST_F(InterveneGd, RefusesNonFiniteWeightsAndSlopes) {
  std::filesystem::copy_file(At("probes.h5"), At("nan_probes.h5"),
                             std::filesystem::copy_options::overwrite_existing);
  {
    h5::File f = h5::File::Open(At("nan_probes.h5"), h5::File::Mode::kReadWrite);
    h5::Dataset w = f.OpenDataset("ridge/xty/model/weights");
    std::vector<double> v = w.ReadAll<double>();
    v[v.size() / 2] = NAN;
    w.Write(v.data(), v.size());
  }
  auto r = RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("nan_probes.h5") +
                       " --target xty --pairs 20 --threads 1 --quiet --out " + At("nan.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("NaN or infinite weights"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(At("nan.h5")));

  Ok(RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("probes.h5") +
                 " --target xty --layers 2 --k 3 --pairs 20 --threads 1 --quiet --out " +
                 At("ok.h5")));
  {
    h5::File f = h5::File::Open(At("ok.h5"), h5::File::Mode::kReadWrite);
    h5::Dataset slope = f.OpenDataset("slope");
    std::vector<double> v = slope.ReadAll<double>();
    v[0] = NAN;
    slope.Write(v.data(), v.size());
  }
  r = RunIclprobe("report --probes " + At("probes.h5") + " --k 3 --interventions " + At("ok.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/slope holds NaN"), std::string::npos) << r.err;
}

// An all-zero probe reads nothing: its "slope 0.000 [0.000, 0.000]" would describe edits that
// were never made, so the run is refused before any work, naming the probe.
TEST_F(InterveneGd, AProbeOfZeroWeightsIsRefusedNotReportedAsUnused) {
  std::filesystem::copy_file(At("probes.h5"), At("zero_probes.h5"),
                             std::filesystem::copy_options::overwrite_existing);
  {
    h5::File f = h5::File::Open(At("zero_probes.h5"), h5::File::Mode::kReadWrite);
    h5::Dataset w = f.OpenDataset("ridge/xty/model/weights");
    std::vector<double> v(w.ReadAll<double>().size(), 0.0);
    w.Write(v.data(), v.size());
  }
  const auto r = RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("zero_probes.h5") +
                             " --target xty --layers 2 --k 3 --pairs 20 --threads 1 --quiet "
                             "--out " +
                             At("zero.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("has all-zero weights"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(At("zero.h5")));
}

// Weights of 1e200 make W^T M W overflow: refused naming the probes file and the probe, not
// with the pseudo-inverse's own "svd failed".
TEST_F(InterveneGd, AProbeOfHugeWeightsIsRefusedNamingTheFile) {
  std::filesystem::copy_file(At("probes.h5"), At("huge_probes.h5"),
                             std::filesystem::copy_options::overwrite_existing);
  {
    h5::File f = h5::File::Open(At("huge_probes.h5"), h5::File::Mode::kReadWrite);
    h5::Dataset w = f.OpenDataset("ridge/xty/model/weights");
    std::vector<double> v = w.ReadAll<double>();
    for (double& x : v)
      x *= 1e200;
    w.Write(v.data(), v.size());
  }
  const auto r = RunIclprobe("intervene -c " + At("gd.h5") + " --probes " + At("huge_probes.h5") +
                             " --target xty --layers 2 --k 3 --pairs 20 --threads 1 --quiet "
                             "--out " +
                             At("huge.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(At("huge_probes.h5")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("W^T M W is not finite"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pinv("), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("svd"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(At("huge.h5")));
}

// The names of the edit's span and metric, as --span and --metric give them.
TEST(InterveneRequest, SpanAndMetricParseTheirNamesAndRefuseOthers) {
  for (const auto s : {intervene::EditSpan::kProbed, intervene::EditSpan::kThroughQuery})
    EXPECT_EQ(intervene::ParseEditSpan(intervene::EditSpanName(s)), s);
  for (const auto m : {intervene::EditMetric::kCovariance, intervene::EditMetric::kStandardized})
    EXPECT_EQ(intervene::ParseEditMetric(intervene::EditMetricName(m)), m);
  EXPECT_EQ(test::InputErrorOf([] { intervene::ParseEditSpan("query"); }),
            "span: expected probed or through-query, got 'query'");
  EXPECT_EQ(test::InputErrorOf([] { intervene::ParseEditMetric("euclidean"); }),
            "metric: expected covariance or standardized, got 'euclidean'");
}

}  // namespace
}  // namespace icl
