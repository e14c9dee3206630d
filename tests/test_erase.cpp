// LEACE erasure (intervene/erase): the eraser's closed form on planted data, and on a compiled
// one-step GD, whose query holds X'y after block 2 and predicts from it alone, erasing X'y there
// costs the model what knowing nothing costs while a random erasure of the same rank costs
// nothing once the state is wide (context distractors); the erasure file reads back; bad input
// is one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "data/task.hpp"
#include "intervene/erase.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using test::Task;

// Sample covariance of the columns of a and b.
arma::mat Cov(const arma::mat& a, const arma::mat& b) {
  const arma::mat ac = a.each_col() - arma::mean(a, 1), bc = b.each_col() - arma::mean(b, 1);
  return ac * bc.t() / a.n_cols;
}

// Erases X'y at state 2 of a compiled one-step gd (d = 4, n = 8; k = 4 and 6; erasers fitted on
// 2,000 prompts, 1,000 test prompts) and checks what holds at any width: the eraser has X'y's
// rank, the erased error reaches the zero predictor's (their intervals overlap, or it is
// higher) and the model unerased knows something (its interval below the zero predictor's).
intervene::ErasureResult EraseXtyAtState2(const construct::Construction& c) {
  intervene::EraseRequest req;
  req.target = "xty";
  req.layers = {2};
  req.ks = {4, 6};
  req.fit_prompts = 2000;
  req.prompts = 1000;
  req.bootstrap = 300;
  intervene::ErasureResult r = intervene::RunErase(construct::Compile(c), "", Task(4, 8), req);
  for (std::size_t ki = 0; ki < r.ks.size(); ++ki) {
    SCOPED_TRACE("k = " + std::to_string(r.ks[ki]));
    EXPECT_EQ(r.rank(0, ki), 4);
    EXPECT_GE(r.erased_hi(0, ki), r.zero_lo(ki));
    EXPECT_LT(r.base_hi(ki), r.zero_lo(ki));
  }
  return r;
}

}  // namespace

// h = A z + B u (z: 3 dims, u: 5 independent dims, h: 12, A and B random): after the eraser no
// linear function of r(h) covaries with z (cross-covariance 0 to the rounding of the moments:
// entries of order 10, sums of 4,000 products, relative 1e-12), r is a projection (r(r(h)) =
// r(h) to rounding) of rank 3, and it leaves the part of h uncorrelated with z where it was:
// the random eraser of the same rank does not remove z.
TEST(Eraser, RemovesEveryLinearTraceOfTheTargetAndNothingElse) {
  arma::arma_rng::set_seed(7);
  const arma::uword N = 4000;
  const arma::mat z = arma::randn(3, N), u = arma::randn(5, N);
  const arma::mat a = arma::randn(12, 3), b = arma::randn(12, 5);
  const arma::mat h = a * z + b * u;
  const intervene::Eraser e = intervene::FitEraser(h, z);
  EXPECT_EQ(e.rank, 3);
  const arma::mat r = e.Apply(h);
  const double scale = arma::abs(Cov(h, z)).max();
  EXPECT_LT(arma::abs(Cov(r, z)).max(), 1e-10 * scale);
  EXPECT_LT(arma::abs(e.Apply(r) - r).max(), 1e-10 * arma::abs(h).max());
  // The map is W^+ P W with P a rank-3 projector: rank 3.
  EXPECT_EQ(arma::rank(e.map, 1e-8 * arma::norm(e.map)), 3u);
  // What is uncorrelated with z in the whitened coordinates stays: the erased h predicts u as
  // well as a least-squares fit on u's own sample covariance with z allows (u and z are
  // independent up to sampling: the change in u's readout is at the sampling level, 1/sqrt(N)).
  const arma::mat coef = arma::solve(Cov(h, h), Cov(h, u));
  const arma::mat ur = coef.t() * (r.each_col() - arma::mean(r, 1));
  const arma::mat uh = coef.t() * (h.each_col() - arma::mean(h, 1));
  EXPECT_LT(arma::norm(ur - uh, "fro") / arma::norm(uh, "fro"), 5.0 / std::sqrt(double(N)));
  const intervene::Eraser rnd = intervene::FitEraser(h, z, 99);
  EXPECT_EQ(rnd.rank, 3);
  EXPECT_GT(arma::abs(Cov(rnd.Apply(h), z)).max(), 0.1 * scale);
}

// gd (alpha = 0.05, d = 4, n = 8; block 2 writes X_k'y_k into the query's state, block 3
// predicts 2 alpha x_(k+1)' X_k'y_k from the query's own state): erasing X'y at state 2 leaves
// the prediction without its information, so the error is the zero predictor's or more (their
// intervals overlap, or it is higher), while the model unerased knows something (its interval
// below the zero predictor's). A random subspace of the same rank in the whitened support costs
// less than erasing X'y (paired increases, disjoint intervals): in this narrow state (a few tens
// of whitened dimensions) it removes part of X'y too, so it is not free (the next test widens
// the state).
TEST(Erase, CompiledGdLosesWhatKnowingNothingCostsWhenXtyIsErased) {
  const intervene::ErasureResult r = EraseXtyAtState2(construct::GdProgram(4, 8, 0.05, 1));
  for (std::size_t ki = 0; ki < r.ks.size(); ++ki)
    EXPECT_LT(r.random_increase_hi(0, ki), r.erased_increase_lo(0, ki)) << "k = " << r.ks[ki];
}

// The same on the rotated construction with context distractors (q = 28, the most d = 4, n = 8
// allows): features of the x's that nothing reads and that are uncorrelated with X'y, so the
// state has many independent directions (about 100 whitened ones against the plain program's 20
// or so), as a trained learner's has. Erasing X'y at state 2 still costs what knowing nothing
// costs, while a random erasure of the same rank now leaves the error within the interval of the
// unerased model's: 4 random whitened directions of about 100 take about 4% of X'y's readout
// with them (an increase of about 0.03 where the interval's half-width is about 0.08). The
// rotation does not matter to either eraser (both are equivariant under an orthogonal change of
// basis of h); it is there because the ground truth asked for is the rotated construction.
TEST(Erase, OnAWideRotatedGdARandomErasureOfTheSameRankIsNearlyFree) {
  construct::Disguise g;
  g.context_distractors = 28;
  auto c = construct::GdProgram(4, 8, 0.05, 1, g);
  c.rotation_seed = 7;
  const intervene::ErasureResult r = EraseXtyAtState2(c);
  for (std::size_t ki = 0; ki < r.ks.size(); ++ki) {
    SCOPED_TRACE("k = " + std::to_string(r.ks[ki]));
    EXPECT_GE(r.random_mean(0, ki), r.base_lo(ki));
    EXPECT_LE(r.random_mean(0, ki), r.base_hi(ki));
  }
}

// The file keeps what the run found; bad requests name their setting.
TEST(Erase, FileReadsBackAndBadRequestsAreRefused) {
  const auto c = construct::GdProgram(4, 8, 0.02, 1);
  intervene::EraseRequest req;
  req.layers = {1, 3};
  req.ks = {3};
  req.fit_prompts = 200;
  req.prompts = 50;
  req.bootstrap = 50;
  const intervene::ErasureResult r =
      intervene::RunErase(construct::Compile(c), "abc", Task(4, 8), req);
  test::TempDir dir;
  intervene::WriteErasureFile(dir / "e.h5", r);
  const intervene::ErasureResult back = intervene::ReadErasureFile(dir / "e.h5");
  EXPECT_EQ(back.layers, r.layers);
  EXPECT_EQ(back.ks, r.ks);
  EXPECT_EQ(back.request.target, "xty");
  EXPECT_TRUE(arma::approx_equal(back.erased, r.erased, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.base_error, r.base_error, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.random_increase_hi, r.random_increase_hi, "absdiff", 0));
  EXPECT_TRUE(arma::all(arma::vectorise(back.rank == r.rank)));
  for (const auto& [mutate, field] :
       std::vector<std::pair<std::function<void(intervene::EraseRequest&)>, std::string>>{
           {[](auto& q) { q.layers = {4}; }, "layers"},
           {[](auto& q) { q.ks = {8}; }, "k"},
           {[](auto& q) {
              q.ks = {3, 3};
            },
            "k"},
           {[](auto& q) { q.target = "w"; }, "target"},
           {[](auto& q) { q.prompts = 1; }, "prompts"}}) {
    intervene::EraseRequest bad = req;
    mutate(bad);
    try {
      intervene::RunErase(construct::Compile(c), "", Task(4, 8), bad);
      ADD_FAILURE() << "accepted a bad " << field;
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  }
}

// The command writes its file and CSV; bad input is one line and exit 2 with nothing written.
TEST(CliErase, WritesTheFileAndRefusesBadInput) {
  test::TempDir dir;
  const std::string ck = dir / "gd.h5";
  ASSERT_EQ(
      test::RunIclprobe("construct --program gd --alpha 0.02 --d 4 --n 8 --out " + ck).exit_code,
      0);
  const auto r = test::RunIclprobe("erase -c " + ck +
                                   " --layers 2 --k 4 --fit-prompts 300 -N 100 --bootstrap 50 "
                                   "--quiet --out " +
                                   (dir / "e.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("zero predictor"), std::string::npos) << r.out;
  EXPECT_EQ(intervene::ReadErasureFile(dir / "e.h5").checkpoint, ck);
  const std::string csv = test::ReadFile(dir / "e.csv");
  EXPECT_EQ(csv.rfind("target,layer,k,prompts,rank,", 0), 0u);
  EXPECT_EQ(test::CountLines(csv), 2);
  test::TempDir out;
  const std::string o = " --quiet --out " + (out / "e.h5");
  const std::string cmd = "erase -c " + ck;
  const std::vector<test::Refusal> cases = {
      {cmd + " --layers 4", "--layers: state 4 is outside 0..3"},
      {cmd + " --k 8", "--k: 8 is outside 1..7"},
      {cmd + " --target w", "--target: expected xty, w_ols or w_ridge"},
      {cmd + " --fit-prompts 1", "--fit-prompts: must be in 2..10000000"},
      {"erase -c " + (dir / "missing.h5"), "missing.h5"},
      {"erase", "--checkpoint: required"},
  };
  test::ExpectEachRefused(cases, o, out.path());
}

}  // namespace icl
