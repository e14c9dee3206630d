// End to end: `iclprobe train` — checkpoints, resume, the evaluation log and bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::CountLines;
using test::RunIclprobe;
using test::TempDir;

namespace {

const std::string kTiny =
    "--d 3 --n 5 --layers 2 --hidden 16 --heads 2 --batch 8 --eval-prompts 16 --threads 1 --quiet ";

std::vector<float> Params(const std::string& path, const std::string& name) {
  return h5::File::Open(path).OpenDataset("params/" + name).ReadAll<float>();
}

}  // namespace

TEST(CliTrain, ResumeAfterStopEqualsAnUninterruptedRun) {
  TempDir tmp;
  const std::string full = tmp / "full.h5", split = tmp / "split.h5";
  const std::string common = kTiny + "--steps 12 --eval-every 4 --save-every 4 --seed 9 ";
  auto r = RunIclprobe("train " + common + "--out " + full);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("finished at step 12 of 12"), std::string::npos) << r.out;
  r = RunIclprobe("train " + common + "--stop-after-steps 6 --out " + split);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stopped at step 6"), std::string::npos) << r.out;
  r = RunIclprobe("train --resume --threads 1 --quiet --out " + split);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resuming at step 6"), std::string::npos) << r.out;
  // Exact by construction: both runs use --threads 1 and the same batch (8), so every step runs
  // the same shapes through the same kernels; batches depend only on (seed, step), and the resume
  // restores parameters and optimizer state bit for bit (float32 stored as float32). Not a
  // cross-batch or cross-thread comparison.
  for (const char* p :
       {"readout.weight", "blocks.1.fc2.weight", "pos_embed", "blocks.0.attn.in_proj_weight"})
    EXPECT_EQ(Params(full, p), Params(split, p)) << p;
  // The evaluation log: one row per (evaluation, k), the same evaluations as the full run.
  const std::string log_full = test::ReadFile(tmp / "full.train.csv");
  const std::string log_split = test::ReadFile(tmp / "split.train.csv");
  EXPECT_EQ(CountLines(log_full), 1 + 3 * 5);
  EXPECT_EQ(CountLines(log_split), 1 + 3 * 5);
  EXPECT_EQ(log_full.substr(0, log_full.find('\n')),
            "step,lr,train_loss,eval_loss,k,model_error,ols_error");
  EXPECT_EQ(h5::File::Open(full).GetInt("step"), 12);
}

TEST(CliTrain, InitOnlyWritesAnUntrainedCheckpoint) {
  TempDir tmp;
  const std::string a = tmp / "a.h5", b = tmp / "b.h5";
  ASSERT_EQ(RunIclprobe("train " + kTiny + "--init-only --seed 3 --out " + a).exit_code, 0);
  ASSERT_EQ(RunIclprobe("train " + kTiny + "--init-only --seed 3 --out " + b).exit_code, 0);
  const h5::File f = h5::File::Open(a);
  EXPECT_EQ(f.GetString("format"), "iclprobe-checkpoint");
  EXPECT_EQ(f.GetInt("step"), 0);
  EXPECT_FALSE(f.Exists("train_state"));
  EXPECT_EQ(Params(a, "readout.weight"), Params(b, "readout.weight"));  // seeded: same draws
  const auto again = RunIclprobe("train " + kTiny + "--init-only --out " + a);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("pass --force"), std::string::npos) << again.err;
}

TEST(CliTrain, DivergenceIsReportedAndTheLastCheckpointKept) {
  TempDir tmp;
  const auto r = RunIclprobe("train " + kTiny +
                             "--steps 50 --lr 1e30 --warmup 0 --clip 0 --save-every 1 --out " +
                             (tmp / "nan.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("loss became"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(tmp / "nan.h5"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "nan.h5.partial"));
}

TEST(CliTrain, BadOptionsAreOneLineExitTwoAndNoFile) {
  TempDir tmp;
  const std::string out = tmp / "m.h5";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--layers 0", "--layers: must be in 1.."},
      {"--hidden 30 --heads 4", "--hidden: 30 is not a multiple of --heads 4"},
      {"--lr -1", "--lr: must be a positive number"},
      {"--d 0", "--d: must be in 1.."},
      {"--batch 0", "--batch: must be positive"},
      {"--resume --layers 4", "--layers: --resume takes the configuration from the checkpoint"},
      {"--resume", "no checkpoint"},
      {"--resume --init-only", "exclude each other"},
      {"--steps abc", "--steps"},
      {"--layers 3 --bottleneck 3",
       "--bottleneck: must be 0 (none) or in 1..L-1 = 1..2 (L = --layers"},
      {"--bottleneck -1", "--bottleneck: must be 0 (none) or in 1..L-1"},
      {"--resume --bottleneck 2",
       "--bottleneck: --resume takes the configuration from the checkpoint"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = RunIclprobe("train --quiet " + args + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  const auto no_out = RunIclprobe("train --quiet");
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("--out: required"), std::string::npos);
  const auto folder = RunIclprobe("train --quiet --out " + (tmp / "none/m.h5"));
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_NE(folder.err.find("does not exist"), std::string::npos);
}

TEST(CliTrain, BaselinesEvaluateACheckpointNextToTheClassicalLearners) {
  TempDir tmp;
  const std::string ckpt = tmp / "tiny.h5", csv = tmp / "b.csv";
  ASSERT_EQ(RunIclprobe("train " + kTiny + "--init-only --out " + ckpt).exit_code, 0);
  auto r = RunIclprobe("baselines --checkpoint " + ckpt +
                       " --prompts 50 --learners ols,knn:3 --threads 1 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("d=3 n=5"), std::string::npos) << r.out;  // task from the checkpoint
  const std::string table = test::ReadFile(csv);
  EXPECT_NE(table.find("\ntiny,0,"), std::string::npos) << table;
  EXPECT_NE(table.find("\ntiny,4,"), std::string::npos) << table;
  EXPECT_NE(table.find("\nols,4,"), std::string::npos) << table;

  r = RunIclprobe("baselines --checkpoint " + ckpt + " --d 4 --prompts 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has d=3 but the prompts have d=4"), std::string::npos) << r.err;
  r = RunIclprobe("baselines --checkpoint " + ckpt + " --n 9 --prompts 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("reads at most n=5"), std::string::npos) << r.err;
  r = RunIclprobe("baselines --checkpoint " + csv + " --prompts 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not an HDF5 file"), std::string::npos) << r.err;
}

TEST(CliTrain, InspectDescribesAndExportsWithoutTrainState) {
  TempDir tmp;
  const std::string ckpt = tmp / "m.h5", shipped = tmp / "shipped.h5";
  ASSERT_EQ(RunIclprobe("train " + kTiny + "--steps 3 --eval-every 3 --out " + ckpt).exit_code, 0);
  auto r = RunIclprobe("inspect " + ckpt + " --export " + shipped);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step         3 of 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resumable    yes"), std::string::npos) << r.out;
  EXPECT_TRUE(h5::File::Open(ckpt).Exists("train_state"));
  EXPECT_FALSE(h5::File::Open(shipped).Exists("train_state"));
  EXPECT_EQ(h5::File::Open(shipped).GetInt("step"), 3);
  EXPECT_EQ(Params(ckpt, "blocks.1.fc1.weight"), Params(shipped, "blocks.1.fc1.weight"));
  r = RunIclprobe("train --resume --quiet --out " + shipped);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no /train_state"), std::string::npos) << r.err;
  r = RunIclprobe("inspect " + ckpt + " --export " + shipped);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
}

// With label noise the evaluation log's reference is the Bayes ridge (lambda = sigma^2 / tau^2),
// not OLS, which interpolates at k = d. Two paths: the log's column and `baselines --learners
// bayes` on the same held-out prompts (seed 999, the evaluation seed, 16 prompts); both are the
// same double-precision closed form, so they agree to the 9 significant digits both print.
TEST(CliTrain, NoisyRunsAreEvaluatedAgainstTheBayesRidge) {
  TempDir tmp;
  const std::string out = tmp / "noisy.h5", csv = tmp / "b.csv";
  ASSERT_EQ(
      RunIclprobe("train " + kTiny + "--noise 0.5 --steps 2 --eval-every 2 --out " + out).exit_code,
      0);
  std::istringstream log(test::ReadFile(tmp / "noisy.train.csv"));
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(line, "step,lr,train_loss,eval_loss,k,model_error,bayes_error");
  std::map<int, double> from_log;
  while (std::getline(log, line)) {
    std::vector<std::string> f;
    std::istringstream row(line);
    for (std::string x; std::getline(row, x, ',');)
      f.push_back(x);
    ASSERT_EQ(f.size(), 7u) << line;
    from_log[std::stoi(f[4])] = std::stod(f[6]);
  }
  ASSERT_EQ(from_log.size(), 5u);  // k = 0..n-1 at the one evaluation
  ASSERT_EQ(
      RunIclprobe("baselines -c " + out + " --learners bayes --prompts 16 --seed 999 --csv " + csv)
          .exit_code,
      0);
  std::istringstream table(test::ReadFile(csv));
  int matched = 0;
  while (std::getline(table, line)) {
    if (line.rfind("bayes,", 0) != 0) continue;
    std::vector<std::string> f;
    std::istringstream row(line);
    for (std::string x; std::getline(row, x, ',');)
      f.push_back(x);
    const int k = std::stoi(f[1]);
    ASSERT_TRUE(from_log.count(k)) << line;
    EXPECT_NEAR(std::stod(f[2]), from_log[k], 2e-8 * std::abs(from_log[k]) + 1e-12) << line;
    ++matched;
  }
  EXPECT_EQ(matched, 5);
}

// A bottleneck learner trains (its masks in every pass: TransformerImpl::forward in the steps,
// QueryForward and forward in the evaluations), its checkpoint records the state, inspect shows
// it, and --bottleneck 0 is a plain learner whose configuration text has no such key.
TEST(CliTrain, BottleneckLearnerRecordsItsStateInTheCheckpoint) {
  TempDir tmp;
  const std::string ckpt = tmp / "bn.h5", plain = tmp / "plain.h5";
  auto r = RunIclprobe(
      "train --bottleneck 2 --d 3 --n 5 --layers 3 --hidden 16 --heads 2 "
      "--steps 20 --batch 8 --eval-every 10 --eval-prompts 16 --threads 1 --quiet "
      "--out " +
      ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bottleneck at state 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finished at step 20 of 20"), std::string::npos) << r.out;
  EXPECT_NE(h5::File::Open(ckpt).GetString("model_config").find("\"bottleneck\":2"),
            std::string::npos);
  r = RunIclprobe("inspect " + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"bottleneck\":2"), std::string::npos) << r.out;
  r = RunIclprobe("train " + kTiny + "--bottleneck 0 --init-only --out " + plain);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(h5::File::Open(plain).GetString("model_config").find("bottleneck"), std::string::npos);
}

TEST(CliTrain, TaskFamilyBadInputIsOneLineExitTwo) {
  TempDir tmp;
  const std::string out = tmp / "m.h5";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--task-family pool:0", "--task-family: pool:M needs M in 1..1048576"},
      {"--task-family pool:1048577", "--task-family: pool:M needs M in 1..1048576"},
      {"--task-family noise-mix:0.1,-1", "--task-family: noise-mix: each sigma"},
      {"--task-family noise-mix:0.1,inf", "--task-family: in 'noise-mix:0.1,inf', expected"},
      {"--task-family noise-mix:0.1,1:0.5,0.6", "sum to 1.1, not 1"},
      {"--task-family sparse:0", "--task-family: sparse:S needs S in 1..3"},
      {"--task-family sparse:4", "--task-family: sparse:S needs S in 1..3"},
      {"--task-family lasso", "--task-family: expected gaussian, pool:M"},
      {"--task-family noise-mix:0.1,1 --noise 0.5", "--noise: with --task-family noise-mix"},
      {"--task-family pool:4 --fixed-w", "--fixed-w: the fixed-w control is its own task"},
      {"--resume --task-family pool:4", "--task-family: --resume takes the configuration"},
  };
  for (const auto& [args, message] : cases) {
    const bool resume = args.rfind("--resume", 0) == 0;  // takes no other setting
    const auto r = RunIclprobe("train --quiet " + std::string(resume ? "" : "--d 3 ") + args +
                               " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  // Learners a task does not define: dmmse without a pool, bayes-sparse past its support count.
  const std::string gauss = tmp / "g.h5";
  ASSERT_EQ(RunIclprobe("train " + kTiny + "--init-only --out " + gauss).exit_code, 0);
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--learners dmmse", "--learners: dmmse is the posterior mean over a task's pool"},
           {"--learners bayes-sparse --d 40 --noise 0.1 --task-family sparse:10",
            "--learners: bayes-sparse enumerates the supports, and C(40, 10) is over 100000"}}) {
    const auto r = RunIclprobe(
        "baselines --prompts 20 " + args +
        (args.find("--d") == std::string::npos ? " --checkpoint " + gauss : std::string()));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// A pool learner's checkpoint carries its pool: baselines run dmmse over it, and the file's task
// says which pool it is.
TEST(CliTrain, APoolLearnersCheckpointCarriesItsPool) {
  TempDir tmp;
  const std::string ckpt = tmp / "pool.h5";
  ASSERT_EQ(
      RunIclprobe("train " + kTiny + "--task-family pool:4:3 --init-only --out " + ckpt).exit_code,
      0);
  const auto info = RunIclprobe("inspect " + ckpt);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("pool:4:3"), std::string::npos) << info.out;
  const auto r = RunIclprobe("baselines --checkpoint " + ckpt +
                             " --prompts 40 --learners dmmse,ols --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dmmse"), std::string::npos) << r.out;
}
