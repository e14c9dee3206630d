// extract and probe under `mpirun -np 2`: the same activations file as one process
// writes, dataset for dataset (h5diff), also after an interrupted two-rank run is resumed; the
// same probes (ridge to 1e-10 relative, gradient probes exactly); errors once, exit 2.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.hpp"

namespace icl::test {
namespace {

namespace fs = std::filesystem;

// mpirun as root needs the two variables; --oversubscribe lets 2 ranks run on 1 core.
CommandResult MpiRun(int ranks, const std::string& args) {
  return RunShell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 "
      "mpirun -np " +
      std::to_string(ranks) + " --oversubscribe " + IclprobeBin() + " " + args);
}

// Whole files compared by h5diff: every dataset and attribute.
CommandResult H5diff(const std::string& a, const std::string& b) {
  return RunShell("h5diff " + a + " " + b);
}

class Mpi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ckpt_ = *dir_ / "ck.h5";
    const auto r = RunIclprobe(
        "train --d 3 --n 5 --layers 2 --hidden 16 --heads 2 --init-only --seed 5 --quiet --out " +
        ckpt_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static std::string ckpt_;
};
TempDir* Mpi::dir_ = nullptr;
std::string Mpi::ckpt_;

// 300 prompts in batches of 64: rounds of 128 rows, the last one 44 rows on rank 0 only.
const char* kExtract = "extract --seed 3 --batch 64 --threads 1 --quiet";
const char* kPrompts = " --prompts 300";

TEST_F(Mpi, TwoRanksWriteTheFileOneProcessWrites) {
  TempDir t;
  for (const std::string extra : {"", " --dtype float16 --compress"}) {
    const std::string one = t / "one.h5", two = t / "two.h5";
    fs::remove(one), fs::remove(two);
    auto r =
        RunIclprobe(std::string(kExtract) + kPrompts + extra + " -c " + ckpt_ + " --out " + one);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = MpiRun(2, std::string(kExtract) + kPrompts + extra + " -c " + ckpt_ + " --out " + two);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(CountLines(r.out), 1) << "rank 0 alone reports: " << r.out;
    EXPECT_FALSE(fs::exists(two + ".partial"));
    const auto d = H5diff(one, two);
    EXPECT_EQ(d.exit_code, 0) << extra << ": " << d.out << d.err;
  }
}

TEST_F(Mpi, AnInterruptedTwoRankRunResumesToTheSameFile) {
  TempDir t;
  const std::string one = t / "one.h5", two = t / "two.h5";
  auto r = RunIclprobe(std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + one);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One round of two batches, then "interrupted": n_complete counts both ranks' rows.
  r = MpiRun(2, std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + two +
                    " --stop-after-batches 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(two + ".partial"));
  r = RunShell("h5dump -a n_complete " + two + ".partial");
  EXPECT_NE(r.out.find("(0): 128"), std::string::npos) << r.out;
  // Resumed by two ranks, and once more from a one-process partial file.
  r = MpiRun(2, std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + two + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto d = H5diff(one, two);
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  const std::string three = t / "three.h5";
  r = RunIclprobe(std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + three +
                  " --stop-after-batches 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = MpiRun(2,
             std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + three + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  d = H5diff(one, three);
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  // Compressed: started by two ranks, resumed by two and then by one.
  const std::string z1 = t / "z1.h5", z2 = t / "z2.h5", zip = std::string(kPrompts) + " --compress";
  r = RunIclprobe(std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = MpiRun(
      2, std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z2 + " --stop-after-batches 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = MpiRun(2, std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z2 +
                    " --resume --stop-after-batches 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunIclprobe(std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z2 + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  d = H5diff(z1, z2);
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  // Compressed chunks a single process began are beyond parallel HDF5: refused, file kept.
  const std::string z3 = t / "z3.h5";
  r = RunIclprobe(std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z3 +
                  " --stop-after-batches 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = MpiRun(2, std::string(kExtract) + zip + " -c " + ckpt_ + " --out " + z3 + " --resume");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume: '" + z3 + ".partial' was started by one process"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(z3 + ".partial"));
}

// The tidy CSV as rows of fields, keyed by target,probe,source,layer,k,seed.
std::map<std::string, std::vector<std::string>> CsvRows(const std::string& path,
                                                        std::vector<std::string>* header) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream in(ReadFile(path));
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string x;
    while (std::getline(ss, x, ','))
      f.push_back(x);
    if (first) {
      *header = f;
      first = false;
      continue;
    }
    rows[f.at(0) + "," + f.at(1) + "," + f.at(2) + "," + f.at(3) + "," + f.at(4) + "," + f.at(5)] =
        f;
  }
  return rows;
}

TEST_F(Mpi, TwoRanksFitTheProbesOneProcessFits) {
  TempDir t;
  const std::string acts = t / "acts.h5";
  auto r = RunIclprobe(std::string(kExtract) + " --prompts 1200 -c " + ckpt_ + " --out " + acts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string probe =
      "probe --activations " + acts +
      " --targets w_ols,xty --probes ridge,linear,mlp --k 2,5 --epochs 3 --codelength "
      "--codelength-blocks 0.01,0.1,0.4,1 "
      "--shuffle-control --threads 1 --quiet";
  r = RunIclprobe(probe + " --out " + (t / "one.h5") + " --csv " + (t / "one.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = MpiRun(2, probe + " --out " + (t / "two.h5") + " --csv " + (t / "two.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> h1, h2;
  const auto one = CsvRows(t / "one.csv", &h1), two = CsvRows(t / "two.csv", &h2);
  ASSERT_EQ(h1, h2);
  ASSERT_EQ(one.size(), two.size());
  ASSERT_EQ(one.size(), 2u * 3 * 2 * 3 * 2);  // targets x probes x sources x layers x k
  int ridge = 0, gradient = 0;
  for (const auto& [key, a] : one) {
    ASSERT_TRUE(two.count(key)) << key;
    const auto& b = two.at(key);
    ASSERT_EQ(a.size(), b.size());
    const bool is_ridge = a[1] == "ridge";
    (is_ridge ? ridge : gradient) += 1;
    for (std::size_t i = 6; i < a.size(); ++i) {
      if (!is_ridge) {
        // Each fit ran whole on one rank with its own seed: the same numbers, to the digit.
        EXPECT_EQ(a[i], b[i]) << key << " " << h1[i];
        continue;
      }
      // Ridge: the same sums over rows, added in another order (per-rank partial sums), are
      // equal to a few units of double rounding; the readout solves a regularised system, so
      // 1e-10 relative leaves room for its conditioning (lambda >= 1e-3 on standardised
      // features).
      const double x = std::stod(a[i]), y = std::stod(b[i]);
      EXPECT_LE(std::abs(x - y), 1e-10 * std::max({std::abs(x), std::abs(y), 1e-12}))
          << key << " " << h1[i] << ": " << a[i] << " vs " << b[i];
    }
  }
  EXPECT_EQ(ridge, 24);
  EXPECT_EQ(gradient, 48);
}

TEST_F(Mpi, AnErrorIsOneLineFromOneRankAndExitsTwo) {
  TempDir t;
  const std::string out = t / "acts.h5";
  auto r = RunIclprobe(std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The output exists: rank 0 refuses (without --force); no rank leaves a partial file.
  r = MpiRun(2, std::string(kExtract) + kPrompts + " -c " + ckpt_ + " --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  std::size_t lines = 0, at = 0;
  while ((at = r.err.find("iclprobe extract:", at)) != std::string::npos)
    ++lines, ++at;
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out + ".partial"));
  // A bad option is found alike by every rank, and printed once.
  r = MpiRun(2, "probe --activations " + out + " --probes ridge --k 9 --out " + (t / "p.h5"));
  EXPECT_EQ(r.exit_code, 2);
  lines = 0, at = 0;
  while ((at = r.err.find("iclprobe probe:", at)) != std::string::npos)
    ++lines, ++at;
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_FALSE(fs::exists(t / "p.h5"));
  // Only extract and probe run on ranks, which rank 0 alone says.
  r = MpiRun(2, "baselines --help");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("only extract and probe"), std::string::npos) << r.err;
  // Lines of iclprobe's own (mpirun adds its report of the exit status).
  auto ours = [](const std::string& err) {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = err.find("iclprobe ", at)) != std::string::npos; ++at)
      n += at == 0 || err[at - 1] == '\n';
    return n;
  };
  EXPECT_EQ(ours(r.err), 1u) << r.err;
  // An input that is a FIFO: found by every rank, said once (it used to be said by every rank,
  // interleaved).
  const std::string fifo = t / "fifo.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& cmd :
       {std::string("probe --activations ") + fifo + " --k 2 --quiet --out " + (t / "p.h5"),
        std::string(kExtract) + kPrompts + " -c " + fifo + " --out " + (t / "f.h5")}) {
    r = MpiRun(2, cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_EQ(ours(r.err), 1u) << cmd << "\n" << r.err;
  }
  // A truncated checkpoint: every rank fails to read it alike, and one says so.
  const std::string trunc = t / "trunc_ck.h5";
  fs::copy_file(ckpt_, trunc);
  fs::resize_file(trunc, fs::file_size(trunc) / 2);
  r = MpiRun(2, std::string(kExtract) + kPrompts + " -c " + trunc + " --out " + (t / "g.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(ours(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("--checkpoint: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(trunc), std::string::npos) << r.err;
}

}  // namespace
}  // namespace icl::test
