// Whole-context counterfactuals (intervene/swap): on a compiled one-step GD, whose query reads
// X'y from its context in block 2's attention, swapping the context reproduces GD's change up to
// that block and nothing after it; the swaps file reads back; bad input is one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "intervene/swap.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using test::Task;

}  // namespace

// gd (one step, alpha = 0.02, d = 4, n = 8; blocks: 1 moves x_i beside y_i and multiplies, 2
// averages over the positions so far (the query's own state then holds X_k'y_k), 3 predicts):
// - at the embedding the swap is the counterfactual prompt itself: the model reference is
//   reproduced exactly (the same computation), and GD's change to the construction's accuracy
//   (products by GELU to 1e-3 relative, test_construct: 1 - reproduced <= ~1e-5; bound 1e-3);
// - from state 2 on the query holds its X'y and reads nothing more from the context: the swap
//   changes nothing (model change exactly 0 at the last state, where only the query's row is
//   read), so neither reference is reproduced (|reproduced| small, slope 0);
// - rotated, the same (a change of basis of the stream changes no prediction).
TEST(Swap, CompiledGdReadsItsContextUntilBlockTwo) {
  const int d = 4, n = 8;
  const data::TaskConfig task = Task(d, n);
  auto c = construct::GdProgram(d, n, 0.02, 1);
  ASSERT_EQ(c.model.layers, 3);
  intervene::SwapRequest req;
  req.learners = "gd:0.02,ols";
  req.pairs = 300;
  req.bootstrap = 200;
  req.batch = 128;
  for (const bool rotated : {false, true}) {
    SCOPED_TRACE(rotated ? "rotated" : "plain");
    if (rotated) c.rotation_seed = 5;
    const intervene::SwapResult r = intervene::RunSwap(construct::Compile(c), "", task, req);
    ASSERT_EQ(r.references, (std::vector<std::string>{"model", "gd:0.02", "ols"}));
    ASSERT_EQ(r.layers, (std::vector<int>{0, 1, 2, 3}));
    ASSERT_EQ(r.ks.size(), std::size_t(n - 1));
    for (std::size_t ki = 0; ki < r.ks.size(); ++ki) {
      SCOPED_TRACE("k = " + std::to_string(r.ks[ki]));
      EXPECT_EQ(r.reproduced(0, 0, ki), 1.0);
      EXPECT_GE(r.reproduced(1, 0, ki), 1 - 1e-3);
      EXPECT_GE(r.reproduced(1, 1, ki), 1 - 1e-3);  // block 1 works within each example
      for (int l = 2; l <= 3; ++l) {
        EXPECT_LT(std::abs(r.reproduced(1, l, ki)), 0.05) << "state " << l;
        EXPECT_LT(std::abs(r.slope(1, l, ki)), 1e-3) << "state " << l;
      }
      EXPECT_TRUE(arma::all(r.model_change.slice(3).col(ki) == 0));
    }
    EXPECT_GE(r.pooled_reproduced_lo(1, 0), 1 - 1e-3);
    EXPECT_LT(r.pooled_reproduced_hi(1, 2), 0.05);
  }
}

// The file keeps what the run found, and the readers refuse what a file must not hold.
TEST(Swap, FileReadsBackAndBadRequestsAreRefused) {
  const data::TaskConfig task = Task(4, 8);
  const auto c = construct::GdProgram(4, 8, 0.02, 1);
  intervene::SwapRequest req;
  req.learners = "gd:0.02";
  req.pairs = 40;
  req.bootstrap = 50;
  req.ks = {2, 5};
  req.layers = {0, 3};
  const intervene::SwapResult r = intervene::RunSwap(construct::Compile(c), "abc", task, req);
  test::TempDir dir;
  intervene::WriteSwapsFile(dir / "s.h5", r);
  const intervene::SwapResult back = intervene::ReadSwapsFile(dir / "s.h5");
  EXPECT_EQ(back.references, r.references);
  EXPECT_EQ(back.layers, r.layers);
  EXPECT_EQ(back.ks, r.ks);
  EXPECT_EQ(back.checkpoint_sha256, "abc");
  EXPECT_TRUE(arma::approx_equal(back.model_change, r.model_change, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.reference_change, r.reference_change, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.reproduced, r.reproduced, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.pooled_slope_hi, r.pooled_slope_hi, "absdiff", 0));
  for (const auto& [mutate, field] :
       std::vector<std::pair<std::function<void(intervene::SwapRequest&)>, std::string>>{
           {[](auto& q) { q.layers = {4}; }, "layers"},
           {[](auto& q) { q.ks = {8}; }, "k"},
           {[](auto& q) { q.ks = {0}; }, "k"},
           {[](auto& q) {
              q.ks = {2, 2};
            },
            "k"},
           {[](auto& q) { q.learners = "gd:0.02,gd:0.02"; }, "learners"},
           {[](auto& q) { q.learners = "wizard"; }, "learners"},
           {[](auto& q) { q.pairs = 1; }, "pairs"}}) {
    intervene::SwapRequest bad = req;
    mutate(bad);
    try {
      intervene::RunSwap(construct::Compile(c), "", task, bad);
      ADD_FAILURE() << "accepted a bad " << field;
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  }
}

namespace {

using test::RunIclprobe;
using test::TempDir;

}  // namespace

// The command: a compiled checkpoint in, the file and its CSV out, the summary on stdout; bad
// input is one line and exit 2 with nothing written.
TEST(CliSwap, WritesTheFileAndRefusesBadInput) {
  TempDir dir;
  const std::string ck = dir / "gd.h5";
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 0.02 --d 4 --n 8 --out " + ck).exit_code,
            0);
  const auto r = RunIclprobe("swap -c " + ck + " --learners gd:0.02 --pairs 60 --bootstrap 50 " +
                             "--k 3,6 --quiet --out " + (dir / "s.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gd:0.02"), std::string::npos) << r.out;
  const intervene::SwapResult s = intervene::ReadSwapsFile(dir / "s.h5");
  EXPECT_EQ(s.checkpoint, ck);
  EXPECT_EQ(s.references.size(), 2u);
  const std::string csv = test::ReadFile(dir / "s.csv");
  EXPECT_EQ(csv.rfind("reference,layer,k,pairs,reproduced,", 0), 0u);
  // 2 references x 4 states x (2 k + pooled) rows and the header.
  EXPECT_EQ(test::CountLines(csv), 1 + 2 * 4 * 3);
  TempDir out;
  const std::string o = " --quiet --out " + (out / "s.h5");
  const std::string c = "swap -c " + ck;
  const std::vector<test::Refusal> cases = {
      {c + " --layers 4", "--layers: state 4 is outside 0..3"},
      {c + " --k 8", "--k: 8 is outside 1..7"},
      {c + " --k 0", "--k: 0 is outside 1..7"},
      {c + " --k 2,2", "--k: '2' is listed twice"},
      {c + " --learners nope", "--learners:"},
      {c + " --learners ols,ols", "ols is listed twice"},
      {c + " --pairs 1", "--pairs: must be in 2..1000000"},
      {"swap -c " + (dir / "missing.h5"), "missing.h5"},
      {"swap", "--checkpoint: required"},
  };
  test::ExpectEachRefused(cases, o, out.path());
}

}  // namespace icl
