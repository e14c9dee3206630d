// End to end: `iclprobe compare` outputs and bad input.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.hpp"

using icl::test::CountLines;
using icl::test::RunIclprobe;
using icl::test::TempDir;

TEST(CliCompare, WritesSpdIlwdAndLinearity) {
  TempDir tmp;
  const std::string a = tmp / "a.h5", b = tmp / "b.h5", csv = tmp / "cmp.csv";
  for (const auto& [path, seed] : {std::pair{a, 1}, std::pair{b, 2}})
    ASSERT_EQ(RunIclprobe(
                  "train --d 3 --n 5 --layers 1 --hidden 16 --heads 2 --init-only --quiet --seed " +
                  std::to_string(seed) + " --out " + path)
                  .exit_code,
              0);
  const auto r = RunIclprobe("compare -c " + a + " -c " + b +
                             " --learners ols,knn:3 --prompts 40 --ilwd-prompts 5 "
                             "--all-pairs --threads 1 --quiet --csv " +
                             csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mean SPD / d over k (rows: learners, columns: checkpoints"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("paired difference from the diagonal learner"), std::string::npos) << r.out;
  const std::string table = icl::test::ReadFile(csv);
  EXPECT_EQ(table.substr(0, table.find('\n')), "model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted");
  EXPECT_EQ(CountLines(table), 1 + (2 * 2 + 1) * 5);  // (2 checkpoints x 2 learners + 1 pair) x 5 k
  EXPECT_NE(table.find("\na,knn:3,4,"), std::string::npos);
  EXPECT_NE(table.find("\nols,knn:3,0,"), std::string::npos);  // --all-pairs row
  const std::string lin = icl::test::ReadFile(tmp / "cmp.linearity.csv");
  EXPECT_EQ(lin.substr(0, lin.find('\n')), "model,k,r2,contexts");
  EXPECT_EQ(CountLines(lin), 1 + 2 * 5);
  const std::string paired = icl::test::ReadFile(tmp / "cmp.paired.csv");
  EXPECT_EQ(paired.substr(0, paired.find('\n')),
            "model,learner,spd_summary,diagonal,diff,diff_lo,diff_hi,minimum,significant");
  EXPECT_EQ(CountLines(paired), 1 + 2 * 2);  // checkpoints x learners
  EXPECT_NE(paired.find("\na,ols,"), std::string::npos);
}

TEST(CliCompare, BadInputIsOneLineExitTwo) {
  TempDir tmp;
  const std::string a = tmp / "a.h5";
  ASSERT_EQ(RunIclprobe(
                "train --d 3 --n 5 --layers 1 --hidden 16 --heads 2 --init-only --quiet --out " + a)
                .exit_code,
            0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-c " + a + " --n 8", "reads at most n=5"},
      {"-c " + a + " --learners ols,magic", "unknown learner spec 'magic'"},
      {"-c " + a + " --queries 3", "--queries: the implicit-weight fit needs at least d+1 = 4"},
      {"--prompts 5", "--checkpoint: required"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("compare --quiet " + args + " --csv " + (tmp / "c.csv"));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "c.csv"));
  }
}
