// End to end: `iclprobe compare` outputs and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

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
  EXPECT_NE(
      r.out.find("mean SPD / d over the window k != d, d+1 (rows: learners, columns: checkpoints"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("paired difference from the diagonal learner"), std::string::npos) << r.out;
  const std::string table = icl::test::ReadFile(csv);
  EXPECT_EQ(table.substr(0, table.find('\n')),
            "model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted,fitted_steps");
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
      {"-c " + a + " --context-shift scale:0", "--context-shift: scale:S: the scale must be"},
      {"-c " + a + " --context-shift scale:nan", "positive finite"},
      {"-c " + a + " --context-shift half-subspace:3", "half-subspace of 3 dimensions in d = 3"},
      {"-c " + a + " --context-shift tilt", "--context-shift: expected none, same"},
      {"-c " + a + " --context-shift orthogonal", "is a query shift only"},
      {"-c " + a + " --query-shift y-scale:2", "--query-shift: y-scale changes labels"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("compare --quiet " + args + " --csv " + (tmp / "c.csv"));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "c.csv"));
  }
}

// Seeds of one cell: verdicts with an interval over seeds, per k and over the window, and the
// cell's curves; checkpoints of another recipe, a seed given twice or a malformed --cell are one
// line and exit 2 with nothing written.
TEST(CliCompare, CellsOfSeedsAndTheirErrors) {
  TempDir tmp;
  auto train = [&](const std::string& name, int seed, int layers) {
    ASSERT_EQ(RunIclprobe("train --d 3 --n 7 --layers " + std::to_string(layers) +
                          " --hidden 16 --heads 2 --init-only --quiet --seed " +
                          std::to_string(seed) + " --out " + (tmp / name))
                  .exit_code,
              0);
  };
  train("s1.h5", 1, 1);
  train("s2.h5", 2, 1);
  train("s3.h5", 3, 1);
  train("deep.h5", 4, 2);
  const std::string cell =
      "--cell c=" + (tmp / "s1.h5") + "," + (tmp / "s2.h5") + "," + (tmp / "s3.h5");
  const auto r = RunIclprobe("compare " + cell +
                             " --learners ols,gd:0.05,zero --prompts 30 --ilwd-prompts 3 "
                             "--threads 1 --quiet --csv " +
                             (tmp / "cmp.csv") + " --plot-dir " + (tmp / "figs"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The cell's figure (gnuplot is installed by scripts/setup).
  EXPECT_GT(std::filesystem::file_size(tmp / "figs/spd_cell0.png"), 0u);
  EXPECT_NE(icl::test::ReadFile(tmp / "figs/plots.gp").find("'spd_cell0.csv' index 2"),
            std::string::npos);
  // Its caption carries the separation rule's verdict with its ratio, as the console does.
  const std::string gp = icl::test::ReadFile(tmp / "figs/plots.gp");
  EXPECT_NE(gp.find("set label 1 'window k in {"), std::string::npos) << gp;
  EXPECT_NE(gp.find("SPD ratio"), std::string::npos) << gp;
  EXPECT_NE(
      r.out.find(
          "verdicts for c (3 seeds, excess-error curve over the budgets: untested; intervals: 95%, "
          "bootstrap over seeds, then prompts"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("window k in {0-2,5-6}: "), std::string::npos) << r.out;
  const std::string verdicts = icl::test::ReadFile(tmp / "cmp.verdicts.csv");
  EXPECT_EQ(
      verdicts.substr(0, verdicts.find('\n')),
      "cell,scope,k,seeds,closest,closest_spd,runner_up,runner_up_spd,margin,margin_lo,"
      "margin_hi,significant,stable,per_seed,budget_curve,separated_from,ratio,ratio_lo,ratio_hi,"
      "seed_ratios,resolved,among,basis");
  EXPECT_EQ(CountLines(verdicts), 1 + 7 + 1);  // k = 0..6 and the window
  EXPECT_NE(verdicts.find("\nc,window,,3,"), std::string::npos) << verdicts;
  EXPECT_NE(verdicts.find(",untested,"), std::string::npos) << verdicts;
  const std::string curves = icl::test::ReadFile(tmp / "cmp.cells.csv");
  EXPECT_EQ(CountLines(curves), 1 + 3 * 7);  // learners x k
  EXPECT_NE(icl::test::ReadFile(tmp / "cmp.csv").find("\nc/seed2,ols,0,"), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--cell c=" + (tmp / "s1.h5") + "," + (tmp / "deep.h5"), "is not a seed of the recipe of"},
      {"--cell c=" + (tmp / "s1.h5") + "," + (tmp / "s1.h5"), "is given twice"},
      {"--cell =" + (tmp / "s1.h5"), "--cell: expected NAME=FILE,FILE"},
      {"--cell c=" + (tmp / "s1.h5") + ",", "is empty"},
      {"--cell 'a b=" + (tmp / "s1.h5") + "'", "--cell: expected NAME=FILE,FILE"},
      {"--cell c=" + (tmp / "s1.h5") + " --cell c=" + (tmp / "s2.h5"), "'c' is given twice"},
      {"-c " + (tmp / "s1.h5") + " --learners gd:fit:4..2", "gd:fit:LO..HI"},
  };
  for (const auto& [args, message] : cases) {
    const auto e = RunIclprobe("compare --quiet --prompts 10 --ilwd-prompts 2 " + args + " --csv " +
                               (tmp / "bad.csv"));
    EXPECT_EQ(e.exit_code, 2) << args;
    EXPECT_EQ(CountLines(e.err), 1) << args << ": " << e.err;
    EXPECT_NE(e.err.find(message), std::string::npos) << args << ": " << e.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad.csv")) << args;
  }
}

// The convergence rule from a run and its half-budget run in inspect; in compare a half run is a
// shorter budget: its excess-error curve marks the cell's verdicts, and --budget-verdicts
// compares it as a cell of its own.
TEST(CliCompare, HalfRunsAreShorterBudgets) {
  TempDir tmp;
  auto train = [&](const std::string& name, int seed, int steps, int layers = 1) {
    const auto t = RunIclprobe("train --d 3 --n 7 --layers " + std::to_string(layers) +
                               " --hidden 16 --heads 2 --batch 8 --eval-every 5 --eval-prompts 40 "
                               "--save-every 5 --threads 1 --quiet --lr 3e-3 --steps " +
                               std::to_string(steps) + " --warmup " + std::to_string(steps / 10) +
                               " --seed " + std::to_string(seed) + " --out " + (tmp / name));
    ASSERT_EQ(t.exit_code, 0) << t.err;
  };
  train("s1.h5", 1, 20);
  train("s2.h5", 2, 20);
  train("s1_half.h5", 1, 10);
  train("s2_half.h5", 2, 10);
  train("deep_half.h5", 1, 10, 2);
  const auto i = RunIclprobe("inspect " + (tmp / "s1.h5") + " --half " + (tmp / "s1_half.h5") +
                             " --threads 1");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("convergence of " + (tmp / "s1.h5")), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("(k = d or d + 1: not in the rule)"), std::string::npos) << i.out;
  const bool converged = i.out.find("\n  converged: ") != std::string::npos;
  EXPECT_TRUE(converged || i.out.find("\n  not converged: ") != std::string::npos) << i.out;

  const auto r = RunIclprobe("compare --cell c=" + (tmp / "s1.h5") + "," + (tmp / "s2.h5") +
                             " --half " + (tmp / "s1_half.h5") +
                             " --learners ols,zero --prompts 20 --ilwd-prompts 2 --threads 1 "
                             "--quiet --csv " +
                             (tmp / "cmp.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Two budgets: the curve falls or is a plateau, and says so in every verdict row of the cell.
  const std::string verdicts = icl::test::ReadFile(tmp / "cmp.verdicts.csv");
  const bool plateau = r.out.find("no power law: plateau") != std::string::npos;
  EXPECT_TRUE(plateau || r.out.find("excess over Bayes falls as T^-b") != std::string::npos)
      << r.out;
  const std::string mark = plateau ? ",plateau," : ",falling,";
  int marked = 0;
  for (std::size_t at = verdicts.find(mark); at != std::string::npos;
       at = verdicts.find(mark, at + 1))
    ++marked;
  EXPECT_EQ(marked, 7 + 1) << verdicts;
  EXPECT_FALSE(std::filesystem::exists(tmp / "cmp.convergence.csv"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "cmp.budgets.csv"));

  // --budget-verdicts compares the half run as a cell of its own on the same prompts: its rows
  // must be those of a separate compare of the half run alone (the closest learner and the SPD
  // of the closest two, per k and over the window), and the printed agreement must follow them.
  const std::string common =
      " --learners ols,zero,ridge:fit --prompts 20 --ilwd-prompts 2 --fit-prompts 10 --seed 5 "
      "--threads 1 --quiet --csv ";
  const auto hv =
      RunIclprobe("compare --cell c=" + (tmp / "s1.h5") + "," + (tmp / "s2.h5") + " --half " +
                  (tmp / "s1_half.h5") + " --budget-verdicts" + common + (tmp / "hv.csv"));
  ASSERT_EQ(hv.exit_code, 0) << hv.err;
  const auto alone =
      RunIclprobe("compare -c " + (tmp / "s1_half.h5") + common + (tmp / "alone.csv"));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  // cell,scope,k,seeds,closest,closest_spd,runner_up,runner_up_spd of each row of one cell.
  auto rows = [](const std::string& csv, const std::string& cell) {
    std::vector<std::string> out;
    std::istringstream in(csv);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(cell + ",", 0) != 0) continue;
      std::string fields = line.substr(cell.size());
      std::size_t at = 0;
      for (int i = 0; i < 7 && at != std::string::npos; ++i)
        at = fields.find(',', at + 1);
      out.push_back(fields.substr(0, at));
    }
    return out;
  };
  const std::string hv_verdicts = icl::test::ReadFile(tmp / "hv.verdicts.csv");
  const auto half_rows = rows(hv_verdicts, "c@10");
  ASSERT_EQ(half_rows.size(), 7u + 1u) << hv_verdicts;  // k = 0..6 and the window
  EXPECT_EQ(half_rows, rows(icl::test::ReadFile(tmp / "alone.verdicts.csv"), "s1_half"));
  auto window_closest = [&](const std::string& cell) {
    const auto r = rows(hv_verdicts, cell).back();  // ,window,,seeds,closest,...
    std::size_t at = 0;
    for (int i = 0; i < 4; ++i)
      at = r.find(',', at) + 1;
    return r.substr(at, r.find(',', at) - at);
  };
  const bool same = window_closest("c") == window_closest("c@10");
  EXPECT_NE(hv.out.find("verdict at a shorter budget, c@10 against c: over the window " +
                        window_closest("c@10")),
            std::string::npos)
      << hv.out;
  EXPECT_NE(hv.out.find(std::string("for the cell: ") + (same ? "the same" : "different")),
            std::string::npos)
      << hv.out;

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compare -c " + (tmp / "s1.h5") + " --budget-verdicts",
       "--budget-verdicts: needs a --budget (or --half) run"},
      {"compare -c " + (tmp / "s1.h5") + " --half " + (tmp / "deep_half.h5"),
       "--half: is a shorter budget (T/2^j steps and warmup, the same recipe and seed) of no"},
      {"compare -c " + (tmp / "s1.h5") + " --half " + (tmp / "s2_half.h5"), "seed"},
      {"compare -c " + (tmp / "s1.h5") + " --half " + (tmp / "s1_half.h5") + " --half " +
           (tmp / "s1_half.h5"),
       "which '" + (tmp / "s1_half.h5") + "' gives already"},
      {"compare -c " + (tmp / "s1.h5") + " --half " + (tmp / "none.h5"), "none.h5"},
      {"inspect " + (tmp / "s1.h5") + " --half " + (tmp / "deep_half.h5"),
       "is not a half-budget run of the recipe of"},
      {"inspect " + (tmp / "s1_half.h5") + " --half " + (tmp / "s1.h5"), "20 is not half of 10"},
  };
  for (const auto& [args, message] : cases) {
    const auto e = RunIclprobe(args);
    EXPECT_EQ(e.exit_code, 2) << args;
    EXPECT_EQ(CountLines(e.err), 1) << args << ": " << e.err;
    EXPECT_NE(e.err.find(message), std::string::npos) << args << ": " << e.err;
  }
}

namespace {

// The CSV's rows as fields (no quoted commas in these files' numbers and short paths).
std::vector<std::vector<std::string>> CsvRows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream f(line);
    for (std::string field; std::getline(f, field, ',');)
      fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

}  // namespace

// The excess error over the Bayes predictor by training budget, in inspect and compare; its
// value at the longest budget is compare's SPD to `bayes` on the same prompts, a second path.
TEST(CliCompare, BudgetsGiveTheExcessErrorCurve) {
  TempDir tmp;
  auto train = [&](const std::string& name, int seed, int steps) {
    const auto t = RunIclprobe(
        "train --d 3 --n 7 --layers 1 --hidden 16 --heads 2 --batch 8 --eval-every 5 "
        "--eval-prompts 40 --save-every 5 --threads 1 --quiet --lr 3e-3 --steps " +
        std::to_string(steps) + " --warmup " + std::to_string(steps / 10) + " --seed " +
        std::to_string(seed) + " --out " + (tmp / name));
    ASSERT_EQ(t.exit_code, 0) << t.err;
  };
  train("t40.h5", 1, 40);
  train("t20.h5", 1, 20);
  train("t10.h5", 1, 10);
  train("t30.h5", 1, 30);
  train("s2_20.h5", 2, 20);
  const std::string budgets = " --budget " + (tmp / "t20.h5") + " --budget " + (tmp / "t10.h5");

  const auto i = RunIclprobe("inspect " + (tmp / "t40.h5") + budgets + " --threads 1");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(
      i.out.find("excess error over the Bayes predictor by training budget: " + (tmp / "t40.h5")),
      std::string::npos)
      << i.out;
  EXPECT_TRUE(i.out.find("excess over Bayes falls as T^-b, b = ") != std::string::npos ||
              i.out.find("no power law: plateau") != std::string::npos)
      << i.out;

  // The training runs' evaluation prompts are seed 999's first 40: compare on the same.
  const auto r = RunIclprobe("compare -c " + (tmp / "t40.h5") + budgets +
                             " --learners bayes --prompts 40 --seed 999 --ilwd-prompts 2 "
                             "--threads 1 --quiet --csv " +
                             (tmp / "cmp.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto curve = CsvRows(icl::test::ReadFile(tmp / "cmp.budgets.csv"));
  ASSERT_EQ(curve.size(), 1u + 3u);
  EXPECT_EQ(curve[0],
            (std::vector<std::string>{"recipe", "steps", "checkpoint", "excess", "excess_lo",
                                      "excess_hi", "change", "change_lo", "change_hi", "falls"}));
  EXPECT_EQ(curve[1][1], "10");
  EXPECT_EQ(curve[3][1], "40");
  EXPECT_EQ(curve[3][2], tmp / "t40.h5");
  const auto fit = CsvRows(icl::test::ReadFile(tmp / "cmp.budget_fit.csv"));
  ASSERT_EQ(fit.size(), 2u);
  EXPECT_EQ(fit[1][1], "3");
  // compare's SPD / d to bayes, averaged over the window k in {0, 1, 2, 5, 6} (d = 3, n = 7).
  double spd = 0;
  int ks = 0;
  for (const auto& row : CsvRows(icl::test::ReadFile(tmp / "cmp.csv")))
    if (row.size() > 3 && row[1] == "bayes" && row[2] != "3" && row[2] != "4" && row[2] != "k")
      spd += std::stod(row[3]), ++ks;
  ASSERT_EQ(ks, 5);
  // Both paths run the float32 model on the same prompts, batched differently: predictions agree
  // to ~1e-6 relative, and an excess of this barely trained model is far from cancellation.
  EXPECT_NEAR(std::stod(curve[3][3]) / (spd / ks), 1.0, 1e-4);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compare -c " + (tmp / "t40.h5") + " --budget " + (tmp / "s2_20.h5"),
       "is a shorter budget (T/2^j steps and warmup, the same recipe and seed) of no compared run"},
      {"compare -c " + (tmp / "t40.h5") + " --budget " + (tmp / "t30.h5"), "is not T/2^j"},
      {"compare -c " + (tmp / "t40.h5") + budgets + " --budget-window 2,9",
       "--budget-window: has k = 9, outside 0..6"},
      {"compare -c " + (tmp / "t40.h5") + " --budget-window 2", "needs a --budget"},
      {"inspect " + (tmp / "t40.h5") + " --budget " + (tmp / "t20.h5") + " --budget " +
           (tmp / "t20.h5"),
       "t20.h5"},
      {"inspect " + (tmp / "t20.h5") + " --budget " + (tmp / "t40.h5"), "is not T/2^j"},
      {"inspect " + (tmp / "t40.h5") + " --budget " + (tmp / "none.h5"), "none.h5"},
  };
  for (const auto& [args, message] : cases) {
    const bool compare = args.rfind("compare", 0) == 0;
    const auto e =
        RunIclprobe(args + " --threads 1" + (compare ? " --quiet --csv " + (tmp / "bad.csv") : ""));
    EXPECT_EQ(e.exit_code, 2) << args;
    EXPECT_EQ(CountLines(e.err), 1) << args << ": " << e.err;
    EXPECT_NE(e.err.find(message), std::string::npos) << args << ": " << e.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad.csv")) << args;
  }
}
