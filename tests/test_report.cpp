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
#include "data/targets.hpp"
#include "data/task.hpp"
#include "extract/activations_schema.hpp"
#include "probes/gradient.hpp"
#include "probes/probes_file.hpp"
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
      {"--probes " + (tmp / "p.h5") + " --metric acc", "--metric: expected r2, nmse or mse"},
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

// The scores a table shows, by the names the probes file stores them under; a library caller's
// unknown one is refused, not printed as tables without cells.
TEST(Report, TableMetricsAreTheStoredScoresAndOthersAreRefused) {
  for (const char* m : {"r2", "nmse", "mse"})
    EXPECT_EQ(test::InputErrorOf([&] { analysis::CheckTableMetric(m); }), "accepted") << m;
  EXPECT_EQ(test::InputErrorOf([] { analysis::CheckTableMetric("R2"); }),
            "metric: expected r2, nmse or mse, got 'R2'");
  TempDir tmp;
  WriteProbes(tmp / "p.h5");
  const analysis::ProbeResults r = analysis::ReadProbeResults(tmp / "p.h5");
  std::ostringstream os;
  EXPECT_EQ(test::InputErrorOf([&] {
              analysis::WriteTables(os, r, "acc", {r.ks.back()}, analysis::TableFormat::kCsv);
            }),
            "metric: expected r2, nmse or mse, got 'acc'");
  EXPECT_TRUE(os.str().empty());
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
  // Options of one learner's report are refused with several files, not ignored (before
  // commit 26f3257 --compare-targets was dropped silently).
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
// k = 4; every target shares one per-prompt sst, so equal fractions give identical errors and
// paired differences of exactly 0). Errors are fraction x sst x u, u in [0.5, 1.5) per prompt.
//   layer 0 (the embedding): every target at 0.9 -> a margin of exactly 0, nothing preferred;
//   layer 1: w_ols 0.2, w_ridge 0.5, w_gd 0.6 in the model and in the control alike: w_ols
//     leads by ~0.3 (significant), but the control leads by the same: not preferred (the case
//     of a comparison any representation passes);
//   layer 2: w_ridge 0.1, w_ols 0.5, w_gd 0.7; control 0.6, 0.6, 0.7: w_ridge leads by ~0.4
//     here, by 0 at the embedding and in the control: preferred.
TEST(Report, CompareTargetsPrefersOnlyOverTheEmbeddingAndTheControls) {
  analysis::ProbeResults r;
  r.path = "planted.h5";
  r.d = 2, r.n = 4, r.seeds = 1, r.layers = {0, 1, 2}, r.ks = {4};
  r.targets = {"w_ols", "w_ridge", "w_gd_0.05_1", "w"}, r.probes = {"ridge"};
  r.sources = {"model", "acts_init"};
  r.learner_targets["w_gd_0.05_1"] = "gd:0.05:1";
  r.n_test = 200, r.bootstrap = 1000, r.bootstrap_seed = 5;
  arma::arma_rng::set_seed(11);
  const arma::vec u = 0.5 + arma::randu<arma::vec>(200);
  const arma::mat sst = 0.5 + arma::randu<arma::mat>(200, 1);
  using Fractions = std::map<std::string, std::vector<double>>;
  const std::map<std::string, Fractions> fraction = {{"model",
                                                      {{"w_ols", {0.9, 0.2, 0.5}},
                                                       {"w_ridge", {0.9, 0.5, 0.1}},
                                                       {"w_gd_0.05_1", {0.9, 0.6, 0.7}},
                                                       {"w", {0.9, 0.6, 0.3}}}},
                                                     {"acts_init",
                                                      {{"w_ols", {0.9, 0.2, 0.6}},
                                                       {"w_ridge", {0.9, 0.5, 0.6}},
                                                       {"w_gd_0.05_1", {0.9, 0.6, 0.7}},
                                                       {"w", {0.9, 0.6, 0.7}}}}};
  for (const auto& [source, per_target] : fraction)
    for (const auto& [t, f] : per_target) {
      r.sst[t] = {sst};
      arma::cube r2(1, 1, 3);
      for (int l = 0; l < 3; ++l) {
        const arma::mat sse = f[l] * sst % u;
        r.sse[t + "/ridge/" + source].push_back(sse);
        r2(0, 0, l) = 1 - arma::accu(sse) / arma::accu(sst);
      }
      r.metric[t + "/ridge/" + source + "/r2"] = r2;
    }
  const auto rows = analysis::CompareTargets(r, {}, 4);  // w_ols, w_ridge, the learner target
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_EQ(rows[0].r2.size(), 3u);
  EXPECT_EQ(rows[0].r2[2].first, "w_gd_0.05_1");
  EXPECT_EQ(rows[0].margin.mean, 0.0);
  EXPECT_FALSE(rows[0].preferred);
  EXPECT_EQ(rows[1].best, "w_ols");
  EXPECT_TRUE(rows[1].significant);
  EXPECT_NEAR(rows[1].margin.mean, 0.3, 0.05);  // (0.5 - 0.2) E[u], E[u] ~ 1
  EXPECT_FALSE(rows[1].preferred);
  ASSERT_EQ(rows[1].over_baselines.size(), 2u);
  EXPECT_EQ(rows[1].over_baselines[0].first, "embedding");
  EXPECT_EQ(rows[1].over_baselines[1].first, "acts_init");
  EXPECT_EQ(rows[1].over_baselines[1].second.mean, 0.0);  // the same errors in the control
  EXPECT_EQ(rows[2].best, "w_ridge");
  EXPECT_EQ(rows[2].runner_up, "w_ols");
  EXPECT_TRUE(rows[2].preferred);
  EXPECT_NEAR(rows[2].over_baselines[0].second.mean, 0.4, 0.05);
  EXPECT_GT(rows[2].over_baselines[1].second.lo, 0.0);
  std::ostringstream line;
  analysis::PrintTargetComparison(line, rows);
  EXPECT_NE(line.str().find("no target preferred at layers 0,1; w_ridge at layers 2"),
            std::string::npos)
      << line.str();
  // The true w is no function of the prompt: refused, with the reason.
  try {
    analysis::CompareTargets(r, {"w_ridge", "w"}, 4);
    ADD_FAILURE() << "w was compared";
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("R2(w) = ceiling(w) x R2(w_ridge)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(analysis::CompareTargets(r, {"w_ols", "xty"}, 4), core::InputError);  // not probed
  EXPECT_THROW(analysis::CompareTargets(r, {"w_ols"}, 4), core::InputError);
}

namespace {

// An activations file over real prompts (d = 4, n = 6, sigma = 1: lambda = 1, so that at k < d
// the minimum-norm w_ols and w_ridge differ far from a multiple of each other) whose layer 1
// carries `planted` (w_ols or w_ridge) linearly at the state after k examples, with noise of SD
// 0.05 per unit; layer 0 (the embedding) and layer 2, and every layer of a control (empty
// `planted`), are Gaussian noise. Only what probe reads is written.
void WritePlantedWeights(const std::string& path, const std::string& planted, unsigned seed,
                         double noise = 1.0) {
  constexpr int d = 4, n = 6, H = 16, N = 2000;
  data::TaskConfig task;
  task.d = d, task.n = n, task.noise = noise;
  const data::PromptSet set = data::SamplePrompts(task, /*seed=*/3, 0, N);
  const data::TargetSet t = data::ComputeTargets(set, task.BayesLambda());
  h5::File f = h5::File::Create(path, true);
  data::WriteFormatAttrs(f, extract::schema::kFormat);
  f.SetAttr("model_config",
            "{\"d\":4,\"n_max\":6,\"layers\":2,\"hidden\":16,\"heads\":1,\"mlp_ratio\":4}");
  f.SetAttr("task_config", task.ToJson());
  f.SetAttr("seed", 3);
  f.SetAttr("prompts", std::int64_t(N));
  f.SetAttr("n_complete", std::int64_t(N));
  f.SetAttr("checkpoint_sha256", std::string(64, '0'));
  f.SetAttr("positions", "all");
  f.SetAttr("layers", "[0,1,2]");
  const hsize_t hN = N;
  f.CreateDataset<double>(extract::schema::kPromptsX, {hN, n, d})
      .Write(set.x.memptr(), set.x.n_elem);
  f.CreateDataset<double>(extract::schema::kPromptsY, {hN, n}).Write(set.y.memptr(), set.y.n_elem);
  f.CreateDataset<double>(extract::schema::kPromptsW, {hN, d}).Write(set.w.memptr(), set.w.n_elem);
  f.CreateDataset<double>(extract::schema::kWOls, {hN, n, d})
      .Write(t.w_ols.memptr(), t.w_ols.n_elem);
  f.CreateDataset<double>(extract::schema::kWRidge, {hN, n, d})
      .Write(t.w_ridge.memptr(), t.w_ridge.n_elem);
  h5::Dataset w = f.CreateDataset<double>(extract::schema::kW, {hN, d});
  w.Write(set.w.memptr(), set.w.n_elem);
  w.SetAttr("per_k", 0);
  f.OpenGroup("targets").SetAttr("ridge_lambda", task.BayesLambda());
  arma::arma_rng::set_seed(seed);
  const arma::mat a(H, d, arma::fill::randn);
  const arma::cube& carried = planted == "w_ols" ? t.w_ols : t.w_ridge;
  for (int l = 0; l <= 2; ++l) {
    arma::cube h(H, 2 * n, N, arma::fill::randn);  // [N, T, H]
    if (l == 1 && !planted.empty())
      for (int i = 0; i < N; ++i)
        for (int k = 1; k <= n; ++k)
          h.slice(i).col(2 * k - 1) = a * carried.slice(i).col(k - 1) + 0.05 * arma::randn(H);
    const arma::fcube hf = arma::conv_to<arma::fcube>::from(h);
    f.CreateDataset<float>(extract::schema::Hidden(l), {hN, 2 * n, H})
        .Write(hf.memptr(), hf.n_elem);
  }
  f.CreateDataset<float>(extract::schema::kPredictions, {hN, n});
}

}  // namespace

// Known answer: planted representations that carry w_ols, or w_ridge(lambda),
// linearly are told apart at k < d under noise: the planted target is preferred at its layer,
// its margin exceeding the same margin at the embedding and in a random control (paired
// intervals above 0). The true w is refused, and its ceiling (R2 of E[w | prompt]) is reported.
TEST(Report, CompareTargetsTellsPlantedWOlsFromPlantedWRidge) {
  TempDir tmp;
  WritePlantedWeights(tmp / "ctrl.h5", "", 9);
  for (const std::string planted : {"w_ols", "w_ridge"}) {
    SCOPED_TRACE(planted);
    const std::string acts = tmp / (planted + ".h5"), probes = tmp / (planted + "_p.h5");
    WritePlantedWeights(acts, planted, 5);
    const auto p =
        RunIclprobe("probe -a " + acts + " --control " + (tmp / "ctrl.h5") +
                    " --targets w_ols,w_ridge,w --k 2,3 --threads 1 --quiet --out " + probes);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const auto r = analysis::ReadProbeResults(probes);
    for (int k : {2, 3}) {
      const auto rows = analysis::CompareTargets(r, {}, k);
      ASSERT_EQ(rows.size(), 3u);  // layers 0, 1, 2 of the ridge probe
      const auto& c = rows[1];
      EXPECT_EQ(c.layer, 1);
      EXPECT_EQ(c.best, planted) << "k=" << k;
      EXPECT_TRUE(c.preferred) << "k=" << k << " margin " << c.margin.lo;
      ASSERT_EQ(c.over_baselines.size(), 2u);
      for (const auto& [name, v] : c.over_baselines)
        EXPECT_GT(v.lo, 0.0) << name << " k=" << k;
      EXPECT_FALSE(rows[0].preferred);  // never at the embedding
    }
    // w's ceiling: below 1 (sigma = 1), and no representation's R2 of w exceeds it by more
    // than sampling (the planted layer's R2 of w at most the ceiling + 0.05).
    ASSERT_TRUE(r.ceilings.count("w"));
    const arma::mat& ceiling = r.ceilings.at("w");
    EXPECT_LT(ceiling.max(), 0.95);
    EXPECT_GT(ceiling.min(), 0.0);
    const arma::cube& w_r2 = *r.Find("w", "ridge", "model", "r2");  // (seed, k, layer)
    for (arma::uword ki = 0; ki < 2; ++ki)
      EXPECT_LE(w_r2(0, ki, 1), ceiling(ki, 0) + 0.05);
    const auto rep = RunIclprobe("report --probes " + probes + " --k 3");
    EXPECT_NE(rep.out.find("ceiling (R² of E[w | prompt]"), std::string::npos) << rep.out;
    const auto refused =
        RunIclprobe("report --probes " + probes + " --k 3 --compare-targets w_ridge,w");
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("not a function of the prompt"), std::string::npos) << refused.err;
  }
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
  // xty (0.95) leads w_ols (0.5) at every layer, but without intervals nothing is preferred.
  EXPECT_NE(r.out.find("Preferred target, ridge probe, k = 4 (no intervals in the file: nothing "
                       "can be preferred): no target preferred at layers 0,1,2,3,4"),
            std::string::npos)
      << r.out;
  const auto w = RunIclprobe("report --probes " + (tmp / "p.h5") + " --compare-targets xty,w");
  EXPECT_EQ(w.exit_code, 2);
  EXPECT_NE(r.out.find("probe,layer,k,target,r2,r2_lo,r2_hi,best,runner_up"), std::string::npos);
}

namespace {

// Draws of a representation h (H = 8) of two targets y ~ N(0, I), all sharing y and the split:
// linear, h = B y + noise, where (y, h) is jointly Gaussian and E[y | h] is linear, so no probe
// can beat the linear one in expectation; or nonlinear, h = B y^3 + noise, from which y is a
// cube root away. Each draw's linear and MLP probes (one state, no pooling) are fitted by the
// library, batched over the draws, and their per-prompt test errors go into one in-memory
// probes file whose "layers" are the draws.
// With `linear_embedding`, draw 0 is a linear code named layer 0 (the embedding: the baseline
// every other draw's margin is compared with); otherwise the draws are layers 1..draws.
analysis::ProbeResults PlantedProbeDraws(bool linear, int draws, unsigned seed,
                                         bool linear_embedding = false) {
  const int N = 1000, H = 8, m = 2;
  arma::arma_rng::set_seed(seed);
  const arma::mat y(m, N, arma::fill::randn);
  arma::uvec order = arma::randperm(N);
  const arma::uvec train = arma::sort(order.head(700)), val = arma::sort(order.subvec(700, 799)),
                   test = arma::sort(order.tail(200));
  std::vector<torch::Tensor> features;
  for (int g = 0; g < draws; ++g) {
    const arma::mat b(H, m, arma::fill::randn);
    const arma::mat z = linear || (linear_embedding && g == 0) ? y : arma::mat(arma::pow(y, 3));
    const arma::fmat h = arma::conv_to<arma::fmat>::from(b * z + 0.5 * arma::randn(H, N));
    features.push_back(
        torch::from_blob(const_cast<float*>(h.memptr()), {N, H}, torch::kFloat32).clone());
  }
  analysis::ProbeResults r;
  r.path = "planted";
  r.d = 2, r.n = 1, r.seeds = 1, r.bootstrap = 1000, r.bootstrap_seed = 7;
  r.ks = {1};
  r.targets = {"y"};
  r.sources = {"model"};
  r.pooling = "position";
  r.n_test = test.n_elem;
  arma::mat c = y.cols(test);
  c.each_col() -= arma::vec(arma::mean(c, 1));
  r.sst["y"] = {arma::mat(arma::sum(arma::square(c), 0).t())};
  for (int g = 0; g < draws; ++g)
    r.layers.push_back(linear_embedding ? g : g + 1);
  for (const bool mlp : {false, true}) {
    probes::GradientProbeOptions o;
    o.mlp = mlp, o.pooled = false, o.mlp_hidden = 32, o.lr = 1e-2, o.max_epochs = 60;
    o.patience = 6, o.seed = seed;
    const auto fits = probes::FitGradientProbes(features, y, train, val, test, o);
    const std::string p = mlp ? "mlp" : "linear";
    r.probes.push_back(p);
    arma::cube r2(1, 1, draws);
    std::vector<arma::mat> sse;
    for (int g = 0; g < draws; ++g) {
      r2(0, 0, g) = fits[g].test.R2();
      sse.push_back(fits[g].test.row_sse);
    }
    r.metric["y/" + p + "/model/r2"] = r2;
    r.sse["y/" + p + "/model"] = sse;
  }
  return r;
}

}  // namespace

// The MLP-versus-linear verdict: on a linear encoding the MLP is called better (its paired
// margin's interval above 0) in at most 10 of 100 draws (a 95% interval errs one-sidedly in 2.5%
// of them; the draws share y and the split, so 10 leaves room for their dependence); on a
// nonlinear one it is called better in most draws, with the margin's sign right, and beyond a
// linear embedding.
TEST(Report, CompareProbesSignsThePlantedNonlinearityAndRarelyFavoursTheMlpOnALinearCode) {
  int mlp_better_on_linear = 0, draws = 0;
  for (unsigned seed : {1u, 2u, 3u, 4u}) {
    const auto r = PlantedProbeDraws(/*linear=*/true, 25, seed);
    for (const auto& c : analysis::CompareProbes(r, "linear", "mlp", {1})) {
      mlp_better_on_linear += c.b_better;
      EXPECT_GT(c.r2_a.mean, 0.5);  // the linear probe reads the linear code
      ++draws;
    }
  }
  EXPECT_EQ(draws, 100);
  EXPECT_LE(mlp_better_on_linear, 10);
  int mlp_better_on_cubic = 0;
  const auto r = PlantedProbeDraws(/*linear=*/false, 25, 5);
  const auto rows = analysis::CompareProbes(r, "linear", "mlp", {1});
  for (const auto& c : rows) {
    mlp_better_on_cubic += c.b_better;
    EXPECT_FALSE(c.a_better);
    EXPECT_GT(c.margin.mean, 0);
  }
  EXPECT_GE(mlp_better_on_cubic, 20);
  // Against a linear embedding the cubic draws' gain is the layers' own: beyond the baseline.
  int beyond = 0;
  const auto with_embedding = analysis::CompareProbes(
      PlantedProbeDraws(/*linear=*/false, 25, 6, /*linear_embedding=*/true), "linear", "mlp", {1});
  for (const auto& c : with_embedding) {
    ASSERT_EQ(c.over_baselines.size(), c.layer == 0 ? 0u : 1u);
    beyond += c.b_better_beyond_baselines;
  }
  EXPECT_FALSE(with_embedding[0].b_better_beyond_baselines);  // never the embedding itself
  EXPECT_GE(beyond, 20);
  std::ostringstream table;
  analysis::WriteProbeComparison(table, rows, analysis::TableFormat::kMarkdown);
  EXPECT_NE(table.str().find("**mlp against linear**, y, k = 1"), std::string::npos) << table.str();
}

TEST(Report, CompareProbesOnTheCommandLine) {
  TempDir tmp;
  WriteProbes(tmp / "p.h5");  // ridge and mlp, no per-prompt errors, no pooling recorded
  const auto r = RunIclprobe("report --probes " + (tmp / "p.h5") +
                             " --compare-probes ridge,mlp --k 4 --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("target,k,layer,source,r2_ridge,r2_mlp,margin,margin_lo,margin_hi,better"),
            std::string::npos)
      << r.out;
  // The fixture's mlp scores are the ridge ones + 0.01: without intervals nothing is called better.
  EXPECT_NE(r.out.find("xty,4,3,model,0.92,0.93,0.01,0.01,0.01,tie"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(no intervals in the file: nothing called better)"), std::string::npos);
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --compare-probes ridge,forest", "--compare-probes: 'forest' is not a probe"},
           {" --compare-probes mlp,mlp", "--compare-probes: 'mlp' is listed twice"},
           {" --compare-probes mlp", "--compare-probes: expected two probe families"},
           {" --compare-probes ridge,mlp --compare-targets xty,w_ols --format csv",
            "--format: csv holds one comparison"}}) {
    const auto bad = RunIclprobe("report --probes " + (tmp / "p.h5") + args);
    EXPECT_EQ(bad.exit_code, 2) << args;
    EXPECT_EQ(test::CountLines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << ": " << bad.err;
  }
}

// How far apart the targets are. Noiseless, from k = d on w_ols = w (X has full
// column rank; the Bayes ridge at sigma = 0 is OLS too), so each maps onto the other with R2 1
// (to rounding); at k = 1 w_ols is w
// projected on x_1, which no fixed map recovers from w, nor w from it.
TEST(Report, TargetMapsSayWhereTargetsCoincide) {
  TempDir tmp;
  WritePlantedWeights(tmp / "a.h5", "w_ols", 5, /*noise=*/0.0);
  const auto p = RunIclprobe("probe -a " + (tmp / "a.h5") +
                             " --targets w_ols,w,w_ridge --k 1,4,6 --threads 1 --quiet --out " +
                             (tmp / "p.h5"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto r = analysis::ReadProbeResults(tmp / "p.h5");
  ASSERT_EQ(r.target_map_names, (std::vector<std::string>{"w_ols", "w", "w_ridge"}));
  ASSERT_EQ(r.target_map_r2.n_slices, 3u);
  // k = 4, 6: the same vector. Not a model output: planted float64 targets and a float64
  // least-squares map whose stabilising ridge (1e-9 of the mean diagonal) shrinks the fit by a
  // relative 1e-9 at most, so 1 - R2 is of order 1e-18 plus float64 rounding (~1e-15) on any
  // CPU; 1e-10 leaves five orders of margin.
  for (arma::uword ki : {1u, 2u}) {
    EXPECT_NEAR(r.target_map_r2(0, 1, ki), 1.0, 1e-10);
    EXPECT_NEAR(r.target_map_r2(1, 0, ki), 1.0, 1e-10);
    EXPECT_NEAR(r.target_map_r2(2, 0, ki), 1.0, 1e-10);  // noiseless: the Bayes ridge is OLS
  }
  EXPECT_LT(r.target_map_r2(1, 0, 0), 0.5);  // k = 1
  EXPECT_LT(r.target_map_r2(0, 1, 0), 0.5);
  const auto rep = RunIclprobe("report --probes " + (tmp / "p.h5") + " --k 1,4");
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("**Where the targets differ**"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("| w_ols → w | "), std::string::npos) << rep.out;
}
