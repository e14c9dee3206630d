// End to end: `iclprobe baselines` output, CSV, and bad input (one line, exit 2, no file).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "tests/test_util.hpp"

using icl::test::CountLines;
using icl::test::RunIclprobe;
using icl::test::TempDir;

namespace {

// learner -> per-k (error, lo, hi) from the tidy CSV.
std::map<std::string, std::vector<std::array<double, 3>>> ReadCurves(const std::string& path) {
  std::map<std::string, std::vector<std::array<double, 3>>> curves;
  std::istringstream in(icl::test::ReadFile(path));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "learner,k,error,error_lo,error_hi");
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string learner, k, e, lo, hi;
    std::getline(row, learner, ',');
    std::getline(row, k, ',');
    std::getline(row, e, ',');
    std::getline(row, lo, ',');
    std::getline(row, hi, ',');
    EXPECT_EQ(std::stoul(k), curves[learner].size());
    curves[learner].push_back({std::stod(e), std::stod(lo), std::stod(hi)});
  }
  return curves;
}

}  // namespace

TEST(CliBaselines, ReproducesTheNoiselessCurveShape) {
  TempDir tmp;
  const auto r = RunIclprobe(
      "baselines --d 8 --n 20 --noise 0 --prompts 500 --seed 1 "
      "--learners ols,ridge:0.1,gd:0.01,sgd:0.03,knn:3 --csv " +
      (tmp / "b.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ols"), std::string::npos);
  auto c = ReadCurves(tmp / "b.csv");
  ASSERT_EQ(c.size(), 5u);
  EXPECT_NEAR(c["ols"][0][0], 1.0, 0.2);  // k = 0: predicting 0 costs tau^2 = 1 per dimension
  for (int k = 8; k < 20; ++k)
    EXPECT_LT(c["ols"][k][0], 1e-8);
  for (int k = 1; k < 8; ++k)
    EXPECT_LT(c["ols"][k][0], c["ols"][k - 1][0]);  // falls to 0 at k = d
  for (int k = 12; k < 20; ++k)
    for (const char* other : {"ols", "ridge:0.1", "gd:0.01", "sgd:0.03"})
      EXPECT_GT(c["knn:3"][k][0], c[other][k][0]) << "knn should be worst at k=" << k;
}

TEST(CliBaselines, BayesIsBestOnNoisyTasks) {
  TempDir tmp;
  const auto r = RunIclprobe(
      "baselines --d 4 --n 16 --noise 0.5 --w-scale 1 --prompts 4000 --seed 2 "
      "--learners bayes,ols,ridge:0.05,ridge:1,gd:0.02,knn:3 --csv " +
      (tmp / "b.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto c = ReadCurves(tmp / "b.csv");
  for (int k = 1; k < 16; ++k)
    for (const auto& [name, curve] : c)
      // Up to sampling error: Bayes' mean lies below every other learner's upper bound.
      EXPECT_LE(c["bayes"][k][0], curve[k][2]) << name << " beats bayes at k=" << k;
}

TEST(CliBaselines, RefusesToOverwriteWithoutForce) {
  TempDir tmp;
  const std::string csv = tmp / "b.csv";
  ASSERT_EQ(RunIclprobe("baselines --d 2 --n 3 --prompts 5 --csv " + csv).exit_code, 0);
  const auto r = RunIclprobe("baselines --d 2 --n 3 --prompts 5 --csv " + csv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(RunIclprobe("baselines --d 2 --n 3 --prompts 5 --force --csv " + csv).exit_code, 0);
}

TEST(CliBaselines, BadInputIsOneLineExitTwoAndNoFile) {
  TempDir tmp;
  const std::string csv = tmp / "out.csv";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--d 0", "--d: must be an integer in 1.."},
      {"--d -3", "--d: must be an integer in 1.."},
      {"--n 0", "--n: must be an integer in 1.."},
      {"--prompts 0", "--prompts: must be positive"},
      {"--learners ols,lars", "unknown learner spec 'lars'"},
      {"--learners ols,lasso", "learner spec 'lasso': expected lasso:LAMBDA"},
      {"--learners ridge:abc", "learner spec 'ridge:abc': expected ridge:LAMBDA"},
      {"--d abc", "--d"},
      {"--frobnicate 3", "unrecognised option"},
      {"--noise -1", "--noise: must be a non-negative finite number"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("baselines " + args + " --csv " + csv);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(csv)) << args;
    EXPECT_FALSE(std::filesystem::exists(csv + ".partial")) << args;
  }
  const auto missing_dir = RunIclprobe("baselines --csv " + (tmp / "nope/out.csv"));
  EXPECT_EQ(missing_dir.exit_code, 2);
  EXPECT_NE(missing_dir.err.find("does not exist"), std::string::npos) << missing_dir.err;
}

TEST(CliBaselines, HelpListsDefaultsAndAnExample) {
  const auto r = RunIclprobe("baselines --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--learners"), std::string::npos);
  EXPECT_NE(r.out.find("(=2000)"), std::string::npos);
  EXPECT_NE(r.out.find("Example:"), std::string::npos);
  const auto unknown = RunIclprobe("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(CountLines(unknown.err), 1);
}
