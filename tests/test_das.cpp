// Distributed alignment search (intervene/das): the algorithms' counterfactual outputs are their
// closed forms; on the rotated one-step gd construction DAS finds the rows that hold X'y (the
// only subspace whose interchange gives B's X'y to A's prediction); with an unused decoy copy
// M X'y the probe reads both, interchanging the decoy moves nothing, and DAS stays inside the
// two copies' span (an exact copy cannot be told apart by interchange); with a decoy that carries
// a nuisance of its own, DAS finds the used copy; the file reads back; bad input is one line and
// exit 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "intervene/das.hpp"
#include "intervene/intervene.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using test::Task;

// The rows `name` of construction c after its rotation Q (RotateResidualStream's Q): Q[:, rows].
intervene::NamedSubspace RowsOf(const construct::Construction& c, const std::string& name) {
  const construct::Rows rows = c.layout[name];
  const int h = c.layout.width();
  arma::mat axes = arma::mat(arma::eye(h, h)).cols(rows.begin, rows.begin + rows.size - 1);
  if (c.rotation_seed) axes = construct::RandomOrthogonal(h, *c.rotation_seed) * axes;
  return {name, axes};
}

intervene::DasRequest SmallRequest() {
  intervene::DasRequest r;
  r.quantity = "xty";
  r.algorithm = "gd:0.05";
  r.layers = {2};
  r.ms = {4};
  r.train_pairs = 3000;
  r.test_pairs = 300;
  r.bootstrap = 200;
  return r;
}

}  // namespace

// Hand-computed counterfactuals on two prompts: w under OLS is A's query times B's OLS weights;
// xty under gd:ALPHA:STEPS iterates w <- w - 2 alpha (X_A'X_A w - X_B'y_B) from 0; under ridge it
// solves (X_A'X_A + lambda I) w = X_B'y_B. Float64 both ways, the same operations up to order:
// agreement to 1e-12 relative.
TEST(Das, TargetsAreTheAlgorithmsCounterfactuals) {
  const data::TaskConfig task = Task(3, 8);
  data::PromptSet a, b;
  intervene::SamplePairs(task, 3, 0, 2, a, b);
  const std::vector<int> ks = {5, 7};
  intervene::DasRequest r;
  r.quantity = "w";
  r.algorithm = "ols";
  const arma::mat w = intervene::DasTargets(r, task, ks, a, b);
  r.quantity = "xty";
  r.algorithm = "gd:0.05:2";
  const arma::mat g = intervene::DasTargets(r, task, ks, a, b);
  r.algorithm = "ridge:0.5";
  const arma::mat rd = intervene::DasTargets(r, task, ks, a, b);
  for (arma::uword j = 0; j < 2; ++j)
    for (std::size_t ki = 0; ki < ks.size(); ++ki) {
      const int k = ks[ki];
      const arma::mat xa = a.x.slice(j).head_cols(k), xb = b.x.slice(j).head_cols(k);
      const arma::vec yb = b.y.col(j).head(k), q = a.x.slice(j).col(k);
      const arma::vec w_ols = arma::solve(xb * xb.t(), xb * yb);  // k > d: invertible
      EXPECT_NEAR(w(j, ki), arma::dot(q, w_ols), 1e-12 * (1 + std::abs(w(j, ki))));
      const arma::mat s = xa * xa.t();
      const arma::vec xty = xb * yb, w1 = 0.1 * xty, w2 = w1 - 0.1 * (s * w1 - xty);
      EXPECT_NEAR(g(j, ki), arma::dot(q, w2), 1e-12 * (1 + std::abs(g(j, ki))));
      const arma::vec wr = arma::solve(s + 0.5 * arma::eye(3, 3), xty);
      EXPECT_NEAR(rd(j, ki), arma::dot(q, wr), 1e-12 * (1 + std::abs(rd(j, ki))));
    }
}

// One-step gd, rotated (alpha = 0.05, d = 4, n = 8): after block 2 the query's own state holds
// X_k'y_k in rows xty (Q[:, xty] after the rotation), which block 3 multiplies with x_{k+1}.
// Swapping exactly that subspace from B gives 2 alpha x_A . X_B'y_B, GD's xty counterfactual: IIA 1
// up to the construction's product error (1e-3 relative; test_construct). DAS with m = d reaches
// IIA >= 0.99 there, its subspace within 5 degrees of Q[:, xty] (the required criteria); a random
// subspace of the same size does not (it swaps parts of x and other rows). DAS starts from the
// ridge probe's directions, which here are X'y's rows already (to 0.01 degree): this checks that
// the training keeps a solution; TurnsBackToXtyFromAStartOffIt checks that it finds one.
TEST(Das, FindsTheRotatedGdConstructionsXtySubspace) {
  const data::TaskConfig task = Task(4, 8);
  auto c = construct::GdProgram(4, 8, 0.05, 1);
  c.rotation_seed = 7;
  intervene::DasRequest r = SmallRequest();
  r.subspaces = {RowsOf(c, "xty"), RowsOf(c, "x")};
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "", task, r);
  ASSERT_EQ(res.subspace_names, (std::vector<std::string>{"probe", "xty", "x"}));
  EXPECT_GE(res.subspace_iia(0, 1), 0.999);  // the construction's own rows
  EXPECT_LT(res.subspace_iia(0, 2), 0.0);    // x: A's query replaced, the wrong counterfactual
  EXPECT_GE(res.iia(0, 0), 0.99);
  EXPECT_GE(res.iia_lo(0, 0), 0.98);
  EXPECT_LE(res.angle_max(0, 0, 1), 5.0);
  EXPECT_LT(res.random_iia(0, 0), 0.5);
  EXPECT_LT(res.none_iia(0), 0.0);  // no interchange: A's own X'y
  ASSERT_EQ(res.bases.size(), 1u);
  EXPECT_EQ(res.bases[0].n_cols, 4u);
}

// The training itself: started 35 degrees off X'y's rows (each basis vector turned toward a row
// of mean_yx, which holds X'y / (2k + 1) there and is read by nothing: IIA below 0.9 at the
// start), DAS reaches IIA >= 0.99 and turns back toward Q[:, xty]. How far back is limited by
// what IIA can see: at angle t toward mean_yx the interchange passes on (cos^2 t + cos t sin t /
// (2k + 1)) of B's X'y, an IIA deficit of about sin^4 t; on 300 held-out pairs the deficit of
// t = 10 degrees (~1e-3) is near the held-out noise, so where the training stops below that
// depends on its float32 gradients (the BLAS kernels' rounding: 13 to 18 degrees seen). The
// bound follows from the IIA asked: IIA >= 0.99 allows sin^4 t <= 0.01, t <= 18.4 degrees, and
// the held-out IIA's noise on 300 pairs (about +-0.002, so sin^4 t <= 0.012: 19.2 degrees);
// bound 20 degrees, far below the start's 35 (IIA < 0.9). The probe start, FindsThe... above,
// sits at 0.01 degrees.
TEST(Das, TurnsBackToXtyFromAStartOffIt) {
  const data::TaskConfig task = Task(4, 8);
  auto c = construct::GdProgram(4, 8, 0.05, 1);
  c.rotation_seed = 7;
  intervene::DasRequest r = SmallRequest();
  const intervene::NamedSubspace xty = RowsOf(c, "xty"), mean = RowsOf(c, "mean_yx");
  const double turn = 35.0 * arma::datum::pi / 180.0;
  r.start_basis = std::cos(turn) * xty.basis + std::sin(turn) * mean.basis;  // orthonormal
  r.subspaces = {xty, {"start", r.start_basis}};
  // Near X'y the IIA lacks ~sin^4 of the angle (1 - cos^2 of the part of B's X'y it passes on):
  // 5 degrees is 6e-5 of IIA, so the stopping rule must see gains far below the default 0.001.
  r.tolerance = 1e-7;
  r.max_epochs = 60;
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "", task, r);
  EXPECT_LT(res.subspace_iia(0, 2), 0.9);  // the start is not a solution
  EXPECT_GE(res.iia(0, 0), 0.99);
  EXPECT_LE(res.angle_max(0, 0, 1), 20.0);
}

// With the decoy (decoy_xty = M X'y written at block 2 and read by nothing): the ridge probe
// reads X'y (R2 >= 0.999); interchanging the decoy's rows moves nothing (its IIA equals no
// interchange's, up to float32 rounding of the rotated edit); DAS reaches IIA >= 0.99 with a
// subspace inside span(xty, decoy_xty) (largest angle to that 2d-dimensional span <= 5 degrees).
// Which subspace inside it is not decided by the interchange: with U = [A; B] in the two copies'
// coordinates, U U' moves xty by (A A' + A B' M) dX'y, which is dX'y for A = I, B = 0 and on a
// whole family of mixtures of the copies (for d = 1: B/A = M). Interchange accuracy alone cannot
// tell the used copy from the decoy here (the "DAS finds the used encoding" criterion);
// see docs/guide/causal.md, its DAS section.
TEST(Das, DecoyIsReadMovesNothingAndDasStaysInTheCopiesSpan) {
  const data::TaskConfig task = Task(4, 8);
  construct::Disguise g;
  g.decoy = "xty";
  auto c = construct::GdProgram(4, 8, 0.05, 1, g);
  c.rotation_seed = 7;
  intervene::DasRequest r = SmallRequest();
  const intervene::NamedSubspace xty = RowsOf(c, "xty"), decoy = RowsOf(c, "decoy_xty");
  r.subspaces = {xty, decoy, {"copies", arma::join_rows(xty.basis, decoy.basis)}};
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "", task, r);
  EXPECT_GE(res.probe_r2(0), 0.999);
  EXPECT_NEAR(res.subspace_iia(0, 2), res.none_iia(0), 1e-4);
  EXPECT_GE(res.subspace_iia(0, 1), 0.999);
  EXPECT_GE(res.iia(0, 0), 0.99);
  EXPECT_LE(res.angle_max(0, 0, 3), 5.0);
}

// The decoy with a nuisance of its own (--decoy-noise 2: decoy_xty = M X'y + 2 (R x)^2) is no
// longer collinear with X'y across prompts, and the interchange can tell the copies apart: U U'
// moves xty by dX'y + A B' 2 d(R x)^2, which is dX'y for all pairs only when A B' = 0, i.e. on
// the used copy alone. The exact copy's solutions (the span of [S; M S], S = (I + M'M)^(-1/2),
// at principal angles atan of M's gains, 30-59 degrees, to either copy) now pass on B's decoy
// nuisance: IIA below 0.99 (0.89 measured). From its default start (the ridge probe, which
// weighs the exact copy over the noisy one) DAS reaches IIA >= 0.99 with the used copy's rows:
// largest angle to xty <= 5 degrees, smallest angle to the decoy >= 45 degrees (the
// criterion). Started at the mixture instead, DAS stays near it (measured: IIA 0.96-0.97,
// largest angle to xty 60 degrees): for d = 1 the loss along the arc from the mixture (angle
// t*) to xty is (cos^2 t + M cos t sin t - 1)^2 Var dX'y + sin^2(2t)/4 4 Var d(Rx)^2, and its
// first term rises between the two, a barrier (see docs/guide/causal.md, its DAS section).
TEST(Das, FindsTheUsedCopyNotADecoyWithANuisanceOfItsOwn) {
  const data::TaskConfig task = Task(4, 8);
  construct::Disguise g;
  g.decoy = "xty";
  g.decoy_noise = 2;
  auto c = construct::GdProgram(4, 8, 0.05, 1, g);
  c.rotation_seed = 7;
  intervene::DasRequest r = SmallRequest();
  const intervene::NamedSubspace xty = RowsOf(c, "xty"), decoy = RowsOf(c, "decoy_xty");
  const arma::mat M = arma::reshape(arma::mat(c.decoy_map), 4, 4).t();  // row-major -> M
  const arma::mat S = arma::sqrtmat_sympd(arma::inv_sympd(arma::eye(4, 4) + M.t() * M));
  const arma::mat mix = xty.basis * S + decoy.basis * (M * S);  // orthonormal: S (I + M'M) S = I
  r.subspaces = {xty, decoy, {"mixture", mix}};
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "", task, r);
  EXPECT_GE(res.probe_r2(0), 0.999);
  EXPECT_NEAR(res.subspace_iia(0, 2), res.none_iia(0), 1e-4);  // the decoy moves nothing
  EXPECT_LT(res.subspace_iia(0, 3), 0.99);                     // the mixture is not a solution
  EXPECT_GE(res.iia(0, 0), 0.99);
  EXPECT_LE(res.angle_max(0, 0, 1), 5.0);
  EXPECT_GE(res.angle_min(0, 0, 2), 45.0);
}

// The w counterfactual on the same construction: its prediction is GD's, 2 alpha x . X'y, so the
// model on the prompt the counterfactual stands for (B's first k examples, A's query) is GD's
// counterfactual output to the construction's accuracy (1e-3 relative: an IIA deficit ~1e-6),
// the ceiling >= 0.999; and w_1 = 2 alpha X'y, so the same subspace carries it (IIA >= 0.99).
TEST(Das, CeilingIsTheModelOnTheCounterfactualPrompt) {
  const data::TaskConfig task = Task(4, 8);
  auto c = construct::GdProgram(4, 8, 0.05, 1);
  c.rotation_seed = 7;
  intervene::DasRequest r = SmallRequest();
  r.quantity = "w";
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "", task, r);
  EXPECT_GE(res.ceiling_iia, 0.999);
  EXPECT_LE(res.ceiling_iia_lo, res.ceiling_iia);
  EXPECT_GE(res.iia(0, 0), 0.99);
}

TEST(Das, FileReadsBackAndBadRequestsAreRefused) {
  const data::TaskConfig task = Task(4, 8);
  auto c = construct::GdProgram(4, 8, 0.05, 1);
  intervene::DasRequest r = SmallRequest();
  r.train_pairs = 300;
  r.test_pairs = 60;
  r.bootstrap = 50;
  r.max_epochs = 1;
  r.layers = {1, 3};
  r.ms = {1, 4};
  r.ks = {3, 6};
  r.subspaces = {RowsOf(c, "xty")};
  const intervene::DasResult res = intervene::RunDas(construct::Compile(c), "abc", task, r);
  test::TempDir dir;
  intervene::WriteDasFile(dir / "d.h5", res);
  const intervene::DasResult back = intervene::ReadDasFile(dir / "d.h5");
  EXPECT_EQ(back.layers, res.layers);
  EXPECT_EQ(back.ms, res.ms);
  EXPECT_EQ(back.ks, res.ks);
  EXPECT_EQ(back.subspace_names, res.subspace_names);
  EXPECT_EQ(back.checkpoint_sha256, "abc");
  EXPECT_TRUE(arma::approx_equal(back.iia, res.iia, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.iia_k, res.iia_k, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.angle_max, res.angle_max, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(back.subspace_iia_hi, res.subspace_iia_hi, "absdiff", 0));
  ASSERT_EQ(back.bases.size(), 4u);
  EXPECT_TRUE(arma::approx_equal(back.bases[3], res.bases[3], "absdiff", 0));
  const int h = c.layout.width();
  for (const auto& [mutate, field] :
       std::vector<std::pair<std::function<void(intervene::DasRequest&)>, std::string>>{
           {[](auto& q) { q.layers = {4}; }, "layers"},
           {[h](auto& q) { q.ms = {h + 1}; }, "m"},
           {[](auto& q) { q.ks = {8}; }, "k"},
           {[](auto& q) { q.quantity = "xtx"; }, "quantity"},
           {[](auto& q) { q.algorithm = "knn:3"; }, "algorithm"},
           {[](auto& q) {
              q.quantity = "w";
              q.algorithm = "knn:3";
            },
            "algorithm"},
           {[](auto& q) {
              q.algorithm = "ols";
              q.ks = {5};  // d + 2 = 6
            },
            "k"},
           {[](auto& q) { q.test_pairs = 1; }, "test_pairs"}}) {
    intervene::DasRequest bad = r;
    mutate(bad);
    try {
      intervene::RunDas(construct::Compile(c), "", task, bad);
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

// The names of the interchange's position and of the search's start, as --position and
// --start (and the Python module) give them.
TEST(DasRequest, PositionAndStartParseTheirNamesAndRefuseOthers) {
  for (const auto p : {intervene::DasPosition::kQuery, intervene::DasPosition::kYToken,
                       intervene::DasPosition::kContext})
    EXPECT_EQ(intervene::ParseDasPosition(intervene::DasPositionName(p)), p);
  for (const auto s : {intervene::DasStart::kProbe, intervene::DasStart::kRandom})
    EXPECT_EQ(intervene::ParseDasStart(intervene::DasStartName(s)), s);
  EXPECT_EQ(test::InputErrorOf([] { intervene::ParseDasPosition("middle"); }),
            "position: expected query, y-token or context, got 'middle'");
  EXPECT_EQ(test::InputErrorOf([] { intervene::ParseDasStart("best"); }),
            "start: expected probe or random, got 'best'");
  // A file's attribute is refused in the file's name.
  try {
    intervene::ParseDasPosition("y", "'d.h5'");
    ADD_FAILURE() << "accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.module(), "'d.h5'");
  }
}

// The command: a compiled checkpoint in (its /construction quantities become named subspaces),
// the file and its CSV out; bad input is one line and exit 2 with nothing written.
TEST(CliDas, WritesTheFileAndRefusesBadInput) {
  TempDir dir;
  const std::string ck = dir / "gd.h5";
  ASSERT_EQ(RunIclprobe("construct --program gd --alpha 0.05 --rotate 3 --d 4 --n 8 --out " + ck)
                .exit_code,
            0);
  const auto r = RunIclprobe("das -c " + ck + " --quantity xty --algorithm gd:0.05 --layers 2 " +
                             "--m 2 --k 3,6 --train-pairs 200 --test-pairs 40 --epochs 1 " +
                             "--bootstrap 50 --quiet --out " + (dir / "d.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const intervene::DasResult d = intervene::ReadDasFile(dir / "d.h5");
  EXPECT_EQ(d.checkpoint, ck);
  EXPECT_NE(std::find(d.subspace_names.begin(), d.subspace_names.end(), "xty"),
            d.subspace_names.end());
  const std::string csv = test::ReadFile(dir / "d.csv");
  EXPECT_EQ(csv.rfind("quantity,algorithm,position,layer,m,k,", 0), 0u);
  EXPECT_EQ(test::CountLines(csv), 1 + 3);  // header, 2 k, pooled
  TempDir out;
  const std::string o = " --quiet --out " + (out / "d.h5");
  const std::string c = "das -c " + ck + " --quantity xty --algorithm gd:0.05";
  const std::vector<test::Refusal> cases = {
      {c + " --layers 4", "--layers: state 4 is outside 0..3"},
      {c + " --m 1000", "--m: subspace size 1000 is outside 1.."},
      {c + " --k 8", "--k: 8 is outside 1..7"},
      {c + " --position middle", "--position: expected query, y-token or context"},
      {c + " --start best", "--start: expected probe or random"},
      {"das -c " + ck + " --quantity xty --algorithm knn:2", "--algorithm:"},
      {"das -c " + ck + " --quantity xty --algorithm ols --k 3", "below d + 2"},
      {c + " --test-pairs 1", "--test-pairs: must be in 2..1000000"},
      {"das -c " + (dir / "missing.h5"), "missing.h5"},
      {"das", "--checkpoint: required"},
  };
  test::ExpectEachRefused(cases, o, out.path());
}

}  // namespace icl
