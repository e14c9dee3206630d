// iclprobe report on a small hand-made probes.h5: onset at the planted layer, rules honoured,
// each format equal to its stored expected file, a missing plot tool, a refused file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "analysis/report.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::RunIclprobe;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

// Layers 0..4, k in {2, 4} (d = 2, n = 4), two seeds; sources model, acts_init, shuffled.
// xty is decodable from layer 3 (R2 0.9+), ridge and mlp; the control stays at 0.2; w_ols
// reaches only 0.5 at layer 4, and the control follows it closely (no selectivity).
// `shift` is added to every model score; `layer3` replaces xty's layer-3 score of the model;
// `model_config` names the learner's configuration (family reports compare it).
void WriteProbes(const std::string& path, double shift = 0, double layer3 = 0.92,
                 const std::string& model_config = "{\"layers\":4}") {
  h5::File f = h5::File::Create(path, true);
  data::WriteFormatAttrs(f, probes::kProbesFormat);  // the owner's format name
  f.SetAttr("model_config", model_config);
  f.SetAttr("task_config", "{\"d\":2,\"n\":4,\"w_scale\":1.0,\"noise\":0.0,\"fixed_w\":false}");
  f.SetAttr("layers", "[0,1,2,3,4]");
  f.SetAttr("ks", "[2,4]");
  f.SetAttr("seeds", 2);
  f.SetAttr("sources", "[\"model\",\"acts_init\",\"shuffled\"]");
  const double xty_model[5] = {0.05, 0.2, 0.6, layer3, 0.95};
  const double wols_model[5] = {0.0, 0.1, 0.2, 0.3, 0.5};
  for (const char* probe : {"ridge", "mlp"}) {
    for (const char* source : {"model", "acts_init", "shuffled"}) {
      for (const char* target : {"xty", "w_ols"}) {
        std::vector<double> r2(5 * 2 * 2);
        for (int l = 0; l < 5; ++l)
          for (int k = 0; k < 2; ++k)
            for (int s = 0; s < 2; ++s) {
              double v = std::string(target) == "xty" ? xty_model[l] : wols_model[l];
              if (std::string(source) == "acts_init")
                v = std::string(target) == "xty" ? 0.2 : v - 0.05;
              if (std::string(source) == "shuffled") v = 0.0;
              if (std::string(probe) == "mlp") v += 0.01;
              if (std::string(source) == "model") v += shift;
              v += (k == 0 ? -0.1 : 0.0) + (s == 0 ? -0.01 : 0.01);
              r2[(l * 2 + k) * 2 + s] = v;
            }
        std::vector<double> nmse(r2.size()), mse(r2.size());
        for (std::size_t i = 0; i < r2.size(); ++i)
          nmse[i] = 1 - r2[i], mse[i] = 2 * nmse[i];
        const std::string base =
            std::string("metrics/") + target + "/" + probe + "/" + source + "/";
        f.CreateDataset<double>(base + "r2", {5, 2, 2}).Write(r2.data(), r2.size());
        f.CreateDataset<double>(base + "nmse", {5, 2, 2}).Write(nmse.data(), nmse.size());
        f.CreateDataset<double>(base + "mse", {5, 2, 2}).Write(mse.data(), mse.size());
      }
    }
  }
  // Pooling weights of the mlp probe, peaked at the state after k examples.
  std::vector<double> alpha(5 * 2 * 2 * 8, 0.0);
  for (int cell = 0; cell < 5 * 2 * 2; ++cell) {
    const int k = (cell / 2) % 2 == 0 ? 2 : 4;
    for (int t = 0; t < 2 * k; ++t)
      alpha[cell * 8 + t] = t == 2 * k - 1 ? 0.65 : 0.35 / (2 * k - 1);
  }
  f.CreateDataset<double>("alpha/xty/mlp/model", {5, 2, 2, 8}).Write(alpha.data(), alpha.size());
}

std::string Fixture(const std::string& name) {
  return std::string(ICL_FIXTURES) + "/report/" + name;
}

}  // namespace

TEST(Report, OnsetIsThePlantedLayer) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");
  const auto r = analysis::ReadProbeResults(tmp / "p.h5");
  analysis::OnsetRule rule;  // relative 0.9, margin 0.1
  const auto onsets = analysis::FindOnsets(r, 4, rule);
  ASSERT_EQ(onsets.size(), 4u);  // {xty, w_ols} x {ridge, mlp}... in target order of the file
  for (const auto& o : onsets) {
    if (o.target == "xty") {
      EXPECT_EQ(o.layer, 3) << o.probe;  // 0.92 >= 0.9 * 0.95, selectivity 0.72
      EXPECT_EQ(o.best_layer, 4);
      for (const auto& [c, l] : o.controls)
        EXPECT_EQ(l, -1) << c;  // never in the controls
    } else {
      EXPECT_EQ(o.layer, -1) << o.probe;  // selectivity over acts_init is only 0.05 <= margin
    }
  }
  // An absolute threshold of 0.95 moves the onset to layer 4 (ridge reaches 0.95, mlp 0.96).
  rule.threshold = 0.95;
  for (const auto& o : analysis::FindOnsets(r, 4, rule))
    if (o.target == "xty") {
      EXPECT_EQ(o.layer, 4) << o.probe;
    }
  // A margin of 0.04 lets w_ols through at layer 4 (selectivity 0.05).
  analysis::OnsetRule loose;
  loose.margin = 0.04;
  for (const auto& o : analysis::FindOnsets(r, 4, loose))
    if (o.target == "w_ols") {
      EXPECT_EQ(o.layer, 4) << o.probe;
    }
}

TEST(Report, EachFormatMatchesItsExpectedFile) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");
  for (const auto& [format, expected] :
       {std::pair{"md", "expected.md"}, std::pair{"tex", "expected.tex"},
        std::pair{"csv", "expected.csv"}}) {
    const std::string out = tmp / (std::string("t.") + format);
    const auto r = RunIclprobe("report --probes " + (tmp / "p.h5") + " --format " + format +
                               " --k d,n --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // ICL_UPDATE_FIXTURES=1 rewrites the expected files (read them before committing).
    // Exact text comparison across machines is safe: the inputs are hand-written doubles and the
    // report only takes means / standard deviations over 2 seeds with scalar IEEE double
    // arithmetic (no BLAS, no threads, no float32), then prints them with fmt.
    if (std::getenv("ICL_UPDATE_FIXTURES"))
      fs::copy_file(out, Fixture(expected), fs::copy_options::overwrite_existing);
    EXPECT_EQ(test::ReadFile(out), test::ReadFile(Fixture(expected)))
        << format << " differs from " << expected;
  }
  const auto r = RunIclprobe("report --probes " + (tmp / "p.h5"));
  EXPECT_NE(
      r.out.find("xty: decodable from layer 3 (ridge, best R2 0.950 at layer 4), layer 3 (mlp"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("w_ols: not decodable by ridge (best R2 0.500 at layer 4)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("never in acts_init"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.9 x the best layer's R2"), std::string::npos) << r.out;
}

TEST(Report, PlotsAreWrittenAndAMissingGnuplotIsHandled) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");
  const auto r = RunIclprobe("report --probes " + (tmp / "p.h5") + " --plot-dir " + (tmp / "figs"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"xty_r2_by_layer.png", "xty_r2_by_layer.svg", "xty_ridge_heatmap.png", "xty_mlp_alpha.svg"})
    EXPECT_TRUE(fs::exists(tmp / ("figs/" + std::string(f)))) << f;
  const auto none = test::RunShell("ICLPROBE_GNUPLOT=/nonexistent/gnuplot '" + test::IclprobeBin() +
                                   "' report --probes '" + (tmp / "p.h5") + "' --plot-dir '" +
                                   (tmp / "figs2") + "'");
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(test::CountLines(none.err), 1);
  EXPECT_NE(none.err.find("gnuplot not found"), std::string::npos) << none.err;
  EXPECT_NE(none.out.find("| layer |"), std::string::npos);  // the tables are still written
}

// The heat map draws only the probed k (2 and 4), as rows 0 and 1 with their k as labels, on
// axes that end half a cell past the first and last layer and k, in a palette that is not the
// rainbow, and marks "~" exactly the cells whose 95% interval contains the onset threshold of
// their k (0.9 x that k's best layer). Planted per-prompt errors (one seed, 200 test prompts):
// at k = 4 layer 1's R2 sits at the threshold (fraction 0.1 + 0.9 x the best layer's 0.05, so
// its point is within 0.1 |1 - mean u| <= 0.05 of it, inside an interval of about +-0.01 for
// this draw) and layer 0's (R2 0.1) and layer 2's (the best, 0.95) are far from it.
TEST(Report, HeatMapsShowOnlyTheProbedKAndMarkUnsettledCells) {
  analysis::ProbeResults r;
  r.path = "planted.h5";
  r.d = 2, r.n = 4, r.seeds = 1, r.layers = {0, 1, 2}, r.ks = {2, 4};
  r.targets = {"xty"}, r.probes = {"ridge"}, r.sources = {"model"};
  r.n_test = 200, r.bootstrap = 1000, r.bootstrap_seed = 5;
  arma::arma_rng::set_seed(3);
  // Per k index an n_test x seeds matrix of sst; per (layer index x K + k index) one of sse.
  const std::vector<arma::mat> sst = {0.5 + arma::randu<arma::mat>(200, 1),
                                      0.5 + arma::randu<arma::mat>(200, 1)};
  const double fraction[3] = {0.9, 0.1 + 0.9 * 0.05, 0.05};
  r.sst["xty"] = sst;
  arma::cube r2(2, 1, 3);  // k x seeds x layers
  for (int l = 0; l < 3; ++l)
    for (int k = 0; k < 2; ++k) {
      const arma::mat sse = fraction[l] * sst[k] % (0.7 + 0.6 * arma::randu<arma::mat>(200, 1));
      r.sse["xty/ridge/model"].push_back(sse);
      r2(k, 0, l) = 1 - arma::accu(sse) / arma::accu(sst[k]);
    }
  r.metric["xty/ridge/model/r2"] = r2;
  const analysis::PlotFiles files = analysis::PlanPlots(r, {});
  ASSERT_TRUE(files.data.count("xty_ridge_heatmap.dat"));
  std::istringstream lines(files.data.at("xty_ridge_heatmap.dat"));
  std::string line;
  std::vector<std::vector<double>> cells;  // col row layer k r2 lo hi unsettled
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::vector<double> c(8);
    std::string label;
    for (int i = 0; i < 7; ++i)
      f >> c[i];
    f >> label;
    c[7] = label.find('~') != std::string::npos;
    EXPECT_EQ(c[3], c[1] == 0 ? 2 : 4) << line;
    EXPECT_EQ(c[2], c[0]) << line;
    cells.push_back(c);
  }
  ASSERT_EQ(cells.size(), 3u * 2);
  int unsettled = 0;
  for (const auto& c : cells) {
    double best = -1;
    for (const auto& o : cells)
      if (o[1] == c[1]) best = std::max(best, o[4]);
    const double threshold = 0.9 * best;
    EXPECT_EQ(c[7], c[5] < threshold && c[6] >= threshold) << c[0] << " " << c[1];
    unsettled += static_cast<int>(c[7]);
    if (c[0] != 1) {
      EXPECT_EQ(c[7], 0) << c[0] << " " << c[1];  // far from the threshold
    }
  }
  EXPECT_GE(unsettled, 1);
  std::string gp;
  for (const auto& [name, text] : files.data)
    if (name == "plots.gp") gp = text;
  EXPECT_NE(gp.find("set ytics ('2' 0, '4' 1)"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set xrange [-0.5:2.5]\nset yrange [-0.5:1.5]"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("rgb 33,13,10"), std::string::npos);  // no rainbow
}

TEST(Report, RefusesOtherFilesAndBadOptions) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");
  {
    h5::File f = h5::File::Create(tmp / "acts.h5");
    data::WriteFormatAttrs(f, "iclprobe-activations");
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--probes " + (tmp / "acts.h5"), "expected 'iclprobe-probes'"},
      {"--probes " + (tmp / "p.h5") + " --format html", "--format: expected md, tex or csv"},
      {"--probes " + (tmp / "p.h5") + " --metric acc", "--metric"},
      {"--probes " + (tmp / "p.h5") + " --k 3", "--k: k=3 was not probed"},
      {"--probes " + (tmp / "p.h5") + " --threshold 2", "--threshold"},
      {"", "--probes: required"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("report " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(test::CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

TEST(Report, FamilyOfLearnersAggregatesAndRefusesOtherConfigurations) {
  TempDir tmp;
  WriteProbes(tmp / "a.h5");
  WriteProbes(tmp / "b.h5", 0.02);
  WriteProbes(tmp / "c.h5", 0.0, 0.5);  // xty's onset moves to layer 4 in this learner
  WriteProbes(tmp / "other.h5", 0.0, 0.92, "{\"layers\":8}");
  // A seed computed with the other arithmetic (kernels) is of the same configuration.
  WriteProbes(tmp / "b2.h5", 0.02, 0.92, "{\"layers\":4,\"kernels\":2}");
  // Two learners: mean and SD over learners of the seed means, in the tidy CSV.
  const auto two =
      RunIclprobe("report --probes " + (tmp / "a.h5") + " " + (tmp / "b.h5") + " --format csv");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("xty (ridge): a layer 3, b layer 3 — the learners agree on layer 3"),
            std::string::npos)
      << two.out;
  // xty ridge at layer 3, k = 4: a's seed mean is 0.92, b's 0.94: mean 0.93, SD 0.02 / sqrt 2.
  EXPECT_NE(two.out.find("xty,ridge,3,4,2,0.93,0.0141421,0.92,0.94,a,0.92,0.92,0.92"),
            std::string::npos)
      << two.out;
  const auto mixed =
      RunIclprobe("report --probes " + (tmp / "a.h5") + " " + (tmp / "b2.h5") + " --format csv");
  EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_NE(mixed.out.find("xty,ridge,3,4,2,0.93,0.0141421,0.92,0.94"), std::string::npos)
      << mixed.out;  // the same numbers as with b, whichever arithmetic made them
  // Three, one of which disagrees; --probes repeated works like a list.
  const auto three = RunIclprobe("report --probes " + (tmp / "a.h5") + " --probes " +
                                 (tmp / "b.h5") + " --probes " + (tmp / "c.h5"));
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_NE(three.out.find("a layer 3, b layer 3, c layer 4 — the learners disagree"),
            std::string::npos)
      << three.out;
  EXPECT_NE(three.out.find("| layer | mean | SD | min | max | a | b | c |"), std::string::npos);
  // A learner of another configuration is refused: one line, exit 2, naming the file.
  const auto bad = RunIclprobe("report --probes " + (tmp / "a.h5") + " " + (tmp / "other.h5"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(test::CountLines(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("other.h5"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("model configurations differ"), std::string::npos) << bad.err;
  // Files of one name in different folders are told apart by their folder.
  fs::create_directories(tmp / "s1");
  fs::create_directories(tmp / "s2");
  fs::copy_file(tmp / "a.h5", tmp / "s1/probes.h5");
  fs::copy_file(tmp / "c.h5", tmp / "s2/probes.h5");
  const auto folders =
      RunIclprobe("report --probes " + (tmp / "s1/probes.h5") + " " + (tmp / "s2/probes.h5"));
  EXPECT_NE(folders.out.find("s1/probes layer 3, s2/probes layer 4"), std::string::npos)
      << folders.out;
  const auto plots = RunIclprobe("report --probes " + (tmp / "a.h5") + " " + (tmp / "b.h5") +
                                 " --plot-dir " + (tmp / "figs"));
  EXPECT_EQ(plots.exit_code, 2);
  EXPECT_NE(plots.err.find("--plot-dir"), std::string::npos) << plots.err;
  // Options of one learner's report are refused with several files, not ignored (issue 29:
  // --compare-targets was dropped silently).
  for (const std::string& option :
       std::vector<std::string>{"--compare-targets", "--interventions " + (tmp / "x.h5")}) {
    const auto one_only =
        RunIclprobe("report --probes " + (tmp / "a.h5") + " " + (tmp / "b.h5") + " " + option);
    EXPECT_EQ(one_only.exit_code, 2) << option;
    EXPECT_EQ(test::CountLines(one_only.err), 1) << one_only.err;
    EXPECT_NE(one_only.err.find(option.substr(0, option.find(' '))), std::string::npos)
        << one_only.err;
    EXPECT_EQ(one_only.out, "") << option;
  }
}

// Which target a layer carries best, on planted per-prompt errors (one seed, 200 test prompts,
// k = 4): layer 0 carries w_ols (R2 0.8 vs 0.5), layer 1 carries w_ridge and w equally (the same
// errors: a paired difference of exactly 0, never significant), layer 2 carries w_ridge (0.9 vs
// 0.85; per-prompt noise of +-50% leaves the paired interval about +-0.01 wide).
TEST(Report, CompareTargetsFindsThePlantedBestAndTies) {
  analysis::ProbeResults r;
  r.path = "planted.h5";
  r.d = 2, r.n = 4, r.seeds = 1, r.layers = {0, 1, 2}, r.ks = {4};
  r.targets = {"w_ols", "w_ridge", "w"}, r.probes = {"ridge"}, r.sources = {"model"};
  r.n_test = 200, r.bootstrap = 1000, r.bootstrap_seed = 5;
  arma::arma_rng::set_seed(11);
  const arma::vec u = 0.5 + arma::randu<arma::vec>(200);  // per-prompt noise on the errors
  const arma::mat sst_w = 0.5 + arma::randu<arma::mat>(200, 1);
  // w_ridge shares w's per-prompt sst, so equal fractions give identical errors: the tie.
  const std::map<std::string, arma::mat> sst = {
      {"w_ols", 0.5 + arma::randu<arma::mat>(200, 1)}, {"w_ridge", sst_w}, {"w", sst_w}};
  const std::map<std::string, std::vector<double>> fraction = {
      {"w_ols", {0.2, 0.7, 0.4}}, {"w_ridge", {0.5, 0.3, 0.1}}, {"w", {0.5, 0.3, 0.15}}};
  for (const auto& [t, f] : fraction) {
    r.sst[t] = {sst.at(t)};
    arma::cube r2(1, 1, 3);
    for (int l = 0; l < 3; ++l) {
      const arma::mat sse = f[l] * sst.at(t) % u;
      r.sse[t + "/ridge/model"].push_back(sse);
      r2(0, 0, l) = 1 - arma::accu(sse) / arma::accu(sst.at(t));
    }
    r.metric[t + "/ridge/model/r2"] = r2;
  }
  const auto rows = analysis::CompareTargets(r, {}, 4);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].best, "w_ols");
  EXPECT_TRUE(rows[0].significant);
  EXPECT_NEAR(rows[0].margin.mean, 0.3, 0.05);  // 1 - 0.2 E[u] vs 1 - 0.5 E[u], E[u] ~ 1
  EXPECT_FALSE(rows[1].significant);            // identical errors
  EXPECT_EQ(rows[1].margin.mean, 0.0);
  EXPECT_EQ(rows[1].margin.lo, 0.0);
  EXPECT_EQ(rows[2].best, "w_ridge");
  EXPECT_EQ(rows[2].runner_up, "w");
  EXPECT_TRUE(rows[2].significant);
  EXPECT_GT(rows[2].margin.lo, 0.0);
  EXPECT_LT(rows[2].margin.lo, 0.05);
  std::ostringstream line;
  analysis::PrintTargetComparison(line, rows);
  EXPECT_NE(
      line.str().find("w_ols at layers 0; no significant best at layers 1; w_ridge at layers 2"),
      std::string::npos)
      << line.str();
  EXPECT_THROW(analysis::CompareTargets(r, {"w_ols", "xty"}, 4), core::InputError);
  EXPECT_THROW(analysis::CompareTargets(r, {"w"}, 4), core::InputError);
}

TEST(Report, CompareTargetsOnTheCommandLine) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");  // targets xty and w_ols, no per-prompt errors
  const auto only_one = RunIclprobe("report --probes " + (tmp / "p.h5") + " --compare-targets");
  EXPECT_EQ(only_one.exit_code, 2);
  EXPECT_NE(only_one.err.find("--compare-targets"), std::string::npos) << only_one.err;
  const auto r = RunIclprobe("report --probes " + (tmp / "p.h5") +
                             " --compare-targets xty,w_ols --format csv --k 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // xty (0.95 + 0.01 at layer 4 for mlp) beats w_ols (0.5) at every layer: point estimates.
  EXPECT_NE(r.out.find("Best-carried target, ridge probe, k = 4 (point estimates, no intervals): "
                       "xty at layers 0,1,2,3,4"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("probe,layer,k,target,r2,r2_lo,r2_hi,best,runner_up"), std::string::npos);
}
