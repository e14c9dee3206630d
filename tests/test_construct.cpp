// construct: each RAW primitive against its definition on random hidden states, the gd program
// against the classical gd learner, and the construction as ground truth for the probes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "analysis/compare_run.hpp"
#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "data/tokens_torch.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"
#include "probes/probes_file.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::RunIclprobe;
using test::TempDir;

namespace {

// Random hidden states [B, T, H] of a layout: one-hot positions and counts as the embedding
// writes them, N(0, scale^2) in every other row except the op's output rows (zero: the residual
// stream adds).
torch::Tensor RandomStates(const construct::Layout& L, int n_max, int B, double scale,
                           const std::string& out) {
  const int T = 2 * n_max;
  auto h = torch::randn({B, T, L.width()}, torch::kFloat32) * scale;
  h.slice(2, L["pos"].begin, L["pos"].begin + T).zero_();
  for (int t = 0; t < T; ++t) {
    h.select(1, t).select(1, L["pos"].begin + t).fill_(1.0);
    h.select(1, t).select(1, L["count"].begin).fill_(double(t + 1));
  }
  if (!out.empty()) h.slice(2, L[out].begin, L[out].begin + L[out].size).zero_();
  return h;
}

learners::BlockImpl& BlockOf(learners::Transformer& m, int block) {
  return *(*m->blocks)[block - 1]->as<learners::Block>();
}

}  // namespace

TEST(Construct, MovCopiesThePreviousPosition) {
  torch::manual_seed(1);
  const auto c = construct::GdProgram(3, 5, 0.1);
  auto m = construct::Compile(c);
  const auto h = RandomStates(c.layout, 5, 4, 1.0, "xprev");
  torch::NoGradGuard no_grad;
  const auto out = BlockOf(m, 1).attn->forward(h);
  const auto x = c.layout["x"], xp = c.layout["xprev"];
  // The attention weight off the previous position is <= 2n e^-40 (1e-16) and the copy is one
  // float32 weighted sum of <= 10 terms: relative error <= 10 * 6e-8 = 6e-7; bound 1e-4.
  for (int t = 1; t < 10; ++t) {
    const auto want = h.select(1, t - 1).slice(1, x.begin, x.begin + x.size);
    const auto got = out.select(1, t).slice(1, xp.begin, xp.begin + xp.size);
    EXPECT_LE((got - want).abs().max().item<double>(),
              1e-4 * std::max(1.0, want.abs().max().item<double>()))
        << "t=" << t;
  }
}

TEST(Construct, MeanAveragesEveryPositionUpToTheCurrentOne) {
  torch::manual_seed(2);
  const auto c = construct::GdProgram(3, 5, 0.1);
  auto m = construct::Compile(c);
  const auto h = RandomStates(c.layout, 5, 4, 1.0, "mean_yx");
  torch::NoGradGuard no_grad;
  const auto out = BlockOf(m, 2).attn->forward(h);
  const auto a = c.layout["yx"], o = c.layout["mean_yx"];
  // Uniform attention: a float32 mean of <= 10 terms, relative error <= 10 u = 6e-7; bound 1e-4.
  for (int t = 0; t < 10; ++t) {
    const auto want = h.slice(1, 0, t + 1).slice(2, a.begin, a.begin + a.size).mean(1);
    const auto got = out.select(1, t).slice(1, o.begin, o.begin + o.size);
    EXPECT_LE((got - want).abs().max().item<double>(),
              1e-4 * std::max(1.0, want.abs().max().item<double>()))
        << "t=" << t;
  }
}

TEST(Construct, MulMultipliesWithinItsDerivedBound) {
  torch::manual_seed(3);
  const auto c = construct::GdProgram(3, 5, 0.1);
  auto m = construct::Compile(c);
  // Inputs of the size the program expects (|y| + |x| well inside the range it was built for).
  const auto h = RandomStates(c.layout, 5, 8, 3.0, "yx");
  torch::NoGradGuard no_grad;
  // The MLP alone: its output added to h.
  auto& b = BlockOf(m, 1);
  const auto out = b.fc2(torch::gelu(b.fc1(h), /*approximate=*/"tanh"));
  const auto y = c.layout["y"], xp = c.layout["xprev"], yx = c.layout["yx"];
  const auto want = h.slice(2, xp.begin, xp.begin + xp.size) * h.slice(2, y.begin, y.begin + 1);
  const auto got = out.slice(2, yx.begin, yx.begin + yx.size);
  // Truncation: relative 2 * 0.1675 s^2 (a^2 + b^2) <= 1.34e-4 with s (|a| + |b|) <= 0.02.
  // Rounding: the four float32 GELU values (~ s|a+b|/2 each) lose 6e-8 of that, amplified by 1/(4 k
  // s^2) into an absolute error ~ 6e-8 * |a+b| / (k s) <= 6e-8 * R^2 / (0.02 k) with R = |a| + |b|
  // bound. Together below 1e-3 * (|ab| + 1) for this program's range; the requirement is <= 1e-2.
  const auto err = (got - want).abs() / (want.abs() + 1.0);
  EXPECT_LE(err.max().item<double>(), 1e-3);
  // The scalar model of the primitive says the same.
  EXPECT_NEAR(construct::GeluProduct(2.5, -1.5, 0.02 / 20), -3.75, 1e-3 * 4.75);
}

TEST(Construct, AffIsExactUpToFloat32Rounding) {
  // A one-op program: out = M a + bias in an MLP, through g(z) - g(-z) = z.
  const int d = 3, n = 5;
  construct::Construction c;
  c.program = "aff";
  auto& L = c.layout;
  L.Add("x", d);
  L.Add("y", 1);
  L.Add("pos", 2 * n);
  L.Add("count", 1);
  L.Add("a", 3);
  L.Add("out", 2);
  construct::Op aff = construct::Aff("a", "out", 1.0);
  aff.matrix = {0.5, -2.0, 1.5, 3.0, 0.25, -1.0};
  aff.bias = {0.75, -4.0};
  c.ops = {aff};
  construct::Assemble(c, d, n);
  ASSERT_EQ(c.model.layers, 1);
  auto m = construct::Compile(c);
  torch::manual_seed(4);
  const auto h = RandomStates(L, n, 8, 3.0, "out").to(torch::kFloat64).to(torch::kFloat32);
  torch::NoGradGuard no_grad;
  auto& b = BlockOf(m, 1);
  const auto got = b.fc2(torch::gelu(b.fc1(h), /*approximate=*/"tanh"))
                       .slice(2, L["out"].begin, L["out"].begin + 2)
                       .to(torch::kFloat64);
  const auto a = h.slice(2, L["a"].begin, L["a"].begin + 3).to(torch::kFloat64);
  const auto M = torch::tensor(aff.matrix, torch::kFloat64).view({2, 3});
  const auto want = torch::matmul(a, M.t()) + torch::tensor(aff.bias, torch::kFloat64);
  // fc1 is a float32 dot product over H rows with three nonzero weights (error <= 3u sum|M a|),
  // each GELU value carries a few ulp of |z| (<= 4u |z|), fc2 sums two units and the bias:
  // |error| <= 16 u (sum|M a| + |bias|) with u = 6e-8, 1e-6 relative. Bound: 1e-4 relative.
  const auto scale =
      torch::matmul(a.abs(), M.abs().t()) + torch::tensor(aff.bias, torch::kFloat64).abs();
  EXPECT_LE(((got - want).abs() / scale).max().item<double>(), 1e-4);
}

TEST(Construct, OuterAndMatVecProductsWithinTheirDerivedBound) {
  const int d = 3, n = 5;
  const double alpha = 0.1;
  const auto c = construct::GdProgram(d, n, alpha, 2);
  auto m = construct::Compile(c);
  const auto& L = c.layout;
  torch::manual_seed(5);
  torch::NoGradGuard no_grad;
  auto mlp = [&](int block, const torch::Tensor& h) {
    auto& b = BlockOf(m, block);
    return b.fc2(torch::gelu(b.fc1(h), /*approximate=*/"tanh")).to(torch::kFloat64);
  };
  auto rows = [&](const torch::Tensor& t, const std::string& name) {
    return t.slice(2, L[name].begin, L[name].begin + L[name].size).to(torch::kFloat64);
  };
  // Error of one GELU product c a b at scale s = 0.02 / R (construct.cpp): truncation
  // 2 * 0.1675 s^2 (a^2 + b^2) |c a b|; rounding: the four float32 GELU values, each within
  // 4u of |z| = s|a +- b| (a few ulp of z / 2), scaled by |c| / (4 k s^2), give
  // 4u s (2|a+b| + 2|a-b|) |c| / (4 k s^2) = 2u (|a+b| + |a-b|) |c| / (k s).
  const double u = 6e-8, k = 0.7978845608028654;
  auto bound = [&](const torch::Tensor& a, const torch::Tensor& b, double R, double c) {
    const double s = 0.02 / R;
    return 0.335 * s * s * (a * a + b * b) * (a * b).abs() * std::abs(c) +
           2 * u * ((a + b).abs() + (a - b).abs()) * std::abs(c) / (k * s);
  };
  {  // Block 1: xx = x x^T (outer), inputs of the size the program expects (N(0, 1)).
    const auto h = RandomStates(L, n, 8, 1.0, "xx");
    const auto x = rows(h, "x");
    const auto a = x.unsqueeze(3).expand({8, 2 * n, d, d}).flatten(2),
               b = x.unsqueeze(2).expand({8, 2 * n, d, d}).flatten(2);
    const auto got = rows(mlp(1, h), "xx");
    EXPECT_TRUE(((got - a * b).abs() <= bound(a, b, 12.0, 1.0)).all().item<bool>());
    // Within the required 1e-2 of the product's size.
    EXPECT_LE(((got - a * b).abs() / ((a * b).abs() + 1.0)).max().item<double>(), 1e-2);
  }
  {  // Block 3: w += 2 alpha (xty - xtx w): an exact aff and a matvec of d^2 products.
    const auto h = RandomStates(L, n, 8, 2.0, "");
    const auto w = rows(h, "w"), xtx = rows(h, "xtx").view({8, 2 * n, d, d});
    const auto want = 2 * alpha * (rows(h, "xty") - torch::matmul(xtx, w.unsqueeze(3)).squeeze(3));
    const auto got = rows(mlp(3, h), "w");
    const double xy_range = 10.0 + 6.0 * std::sqrt(double(d));
    const double w_range = 10.0 + std::min(2.0 * alpha * 2 * n * xy_range, 50.0);
    const double R = 5.0 * n + w_range;  // GdProgram's range of the matvec
    const auto wb = w.unsqueeze(2).expand({8, 2 * n, d, d});
    // Per output row: the sum of its d product bounds, plus the aff's float32 rounding
    // (16 u of 2 alpha |xty|, AffIsExactUpToFloat32Rounding) and the float32 sum (d u).
    const auto per_row = bound(xtx, wb, R, 2 * alpha).sum(3) +
                         16 * u * 2 * alpha * rows(h, "xty").abs() + d * u * want.abs();
    EXPECT_TRUE(((got - want).abs() <= per_row).all().item<bool>())
        << ((got - want).abs() / per_row).max().item<double>();
    const auto terms = 2 * alpha * torch::matmul(xtx.abs(), w.abs().unsqueeze(3)).squeeze(3);
    EXPECT_LE(((got - want).abs() / (terms + 1.0)).max().item<double>(), 1e-2);
  }
}

TEST(Construct, GdKStepsPredictsLikeTheKStepGdLearner) {
  const double alpha = 0.02;
  const int d = 4, n = 12, steps = 3;
  const auto c = construct::GdProgram(d, n, alpha, steps);
  EXPECT_EQ(c.model.layers, steps + 2);
  analysis::CompareRequest req;
  req.learner_specs = "gd:0.02:3,gd:0.02";
  req.prompts = 2000;
  req.ilwd_prompts = 20;
  req.seed = 6;
  data::TaskConfig task;
  task.d = d;
  task.n = n;
  const auto r = analysis::RunCompare(
      {analysis::TransformerUnderTest("gd3", task, construct::Compile(c))}, req);
  ASSERT_EQ(r.entries[0].learner, "gd:0.02:3");
  for (int k = 0; k < n; ++k)
    EXPECT_LE(r.entries[0].spd.mean(k), 1e-4) << "k=" << k;  // SPD / d
  EXPECT_GT(r.entries[1].spd.mean(n - 1), 1e-2);             // and the steps are not one
}

TEST(Construct, MatMatProductWithinItsDerivedBound) {
  // Block 4 of newton:2:0.05:0.25 computes Y_1 = 2 Y_0 - Y_0 P_1: an exact aff (Y += Y) and a
  // matmat mul (Y -= Y P) in one MLP, both reading the same state.
  const int d = 3, n = 5;
  const auto c = construct::NewtonProgram(d, n, 2, 0.05, 0.25);
  auto m = construct::Compile(c);
  const auto& L = c.layout;
  torch::manual_seed(7);
  torch::NoGradGuard no_grad;
  const auto h = RandomStates(L, n, 8, 1.0, "");
  auto rows = [&](const torch::Tensor& t, const std::string& name) {
    return t.slice(2, L[name].begin, L[name].begin + L[name].size).to(torch::kFloat64);
  };
  auto& b = BlockOf(m, 4);
  const auto got = rows(b.fc2(torch::gelu(b.fc1(h), /*approximate=*/"tanh")), "inv");
  const auto Y = rows(h, "inv").view({8, 2 * n, d, d}), P = rows(h, "prod").view({8, 2 * n, d, d});
  const auto want = (Y - torch::matmul(Y, P)).flatten(2);
  // Range of |a| + |b| of the product: min(2^K C, 1/lambda) + 2 (NewtonProgram).
  const double R = std::min(0.05 * 4, 1 / 0.25) + 2.0, s = 0.02 / R;
  const double u = 6e-8, k = 0.7978845608028654;
  // Each of the d products of an entry: truncation 0.335 s^2 (a^2 + b^2) |ab| and rounding
  // 2u (|a+b| + |a-b|) / (k s) (OuterAndMatVecProductsWithinTheirDerivedBound); the aff adds
  // 16 u |Y| and the float32 sums d u |want|.
  const auto a = Y.unsqueeze(4).expand({8, 2 * n, d, d, d});   // [.., i, l, j]
  const auto bb = P.unsqueeze(2).expand({8, 2 * n, d, d, d});  // [.., i, l, j]
  const auto per_product = 0.335 * s * s * (a * a + bb * bb) * (a * bb).abs() +
                           2 * u * ((a + bb).abs() + (a - bb).abs()) / (k * s);
  const auto bound =
      per_product.sum(3).flatten(2) + 16 * u * rows(h, "inv").abs() + d * u * want.abs();
  EXPECT_TRUE(((got - want).abs() <= bound).all().item<bool>())
      << ((got - want).abs() / bound).max().item<double>();
}

// The requirement: newton:K:C:lambda matches the classical newton:K:C:lambda and ridge:lambda
// to SPD/d <= 1e-4 at every k on 2,000 prompts, d = 4, n = 12, lambda in {1/4, 4/9}. K = 12
// and C = 0.03: C lambda_max(A) < 2 for every one of 10,000 prompts' prefixes (counted below),
// and the slowest direction (the smallest eigenvalue of A is >= lambda) contracts as
// (1 - C lambda)^(2^K) <= (1 - 0.0075)^4096 = e^-31, far below float32's precision.
TEST(Construct, NewtonProgramPredictsLikeTheClassicalNewtonAndRidge) {
  const int d = 4, n = 12;
  data::TaskConfig task;
  task.d = d;
  task.n = n;
  for (const std::string lambda : {"0.25", "0.4444444444444444"}) {
    const std::string spec = "newton:12:0.03:" + lambda;
    const auto c = construct::BuildProgram(construct::ParseProgram(spec), d, n, 0);
    EXPECT_EQ(c.model.layers, 2 * 12 + 4);
    const auto outside = construct::CountDivergent(c, task, 1, 10000);
    EXPECT_EQ(outside.outside, 0) << spec;
    EXPECT_EQ(outside.pairs, 10000 * n);
    analysis::CompareRequest req;
    req.learner_specs = spec + ",ridge:" + lambda + ",ridge:1";
    req.prompts = 2000;
    req.ilwd_prompts = 2;
    req.seed = 8;
    const auto r = analysis::RunCompare(
        {analysis::TransformerUnderTest("newton", task, construct::Compile(c))}, req);
    for (int e = 0; e < 2; ++e)
      for (int k = 0; k < n; ++k)
        EXPECT_LE(r.entries[e].spd.mean(k), 1e-4) << r.entries[e].learner << " k=" << k;
    EXPECT_GT(r.entries[2].spd.mean(2), 1e-3);  // and another lambda is clearly farther
  }
}

// --rotate folds Q into every weight, so every state is Q h and the predictions change only by
// float32 rounding. The rotated model's dot products are dense (H terms instead of one to
// three), so each pre-activation carries a rounding error of order sqrt(H) u |w| |h| (random
// rounding) instead of u |z|. A GELU product divides its pre-activation's error by 2 k s
// (s = 0.02 / R): with H <= 142, |h| <= 60 and R <= 70 that is about 12 * 6e-8 * 1.4 s * 60 /
// (2 * 0.8 * s^2) ~ 0.06 absolute on products of size up to R^2 / 4 ~ 1,200, a relative
// 1e-3 at most; gd's three steps pass it on with gains below 1 (2 alpha lambda < 2), and
// Newton-Schulz damps the error of every step but the last (Y' = 2Y - YAY is stationary in Y
// at Y = A^-1). So predictions move by a relative 1e-3 at most, SPD/d by (1e-3)^2 E[y^2] / d
// = 1e-6 (E[y^2] = d): the required 1e-4 holds with a margin of 100.
TEST(Construct, RotationKeepsPredictionsAndRotatesEveryState) {
  const int d = 4, n = 12;
  data::TaskConfig task;
  task.d = d;
  task.n = n;
  const auto set = data::SamplePrompts(task, 9, 0, 500);
  const auto tokens = data::TokenTensor(set, 0, set.size());
  for (const std::string program : {"gd:3", "newton:12:0.03:0.25"}) {
    auto c = construct::BuildProgram(construct::ParseProgram(program), d, n, 0.02);
    auto plain = construct::Compile(c);
    c.rotation_seed = 11;
    auto rotated = construct::Compile(c);
    const arma::mat q = construct::RandomOrthogonal(c.model.hidden, 11);
    EXPECT_LT(arma::abs(q.t() * q - arma::eye(q.n_rows, q.n_cols)).max(), 1e-12);
    torch::NoGradGuard no_grad;
    learners::ForwardOptions fo;
    fo.hidden_states = true;
    const auto a = plain->Run(tokens, fo), b = rotated->Run(tokens, fo);
    const auto diff = (a.predictions - b.predictions).to(torch::kFloat64);
    const auto spd = (diff * diff).mean(0) / d;  // per k
    for (int k = 0; k < n; ++k)
      EXPECT_LE(spd[k].item<double>(), 1e-4) << program << " k=" << k;
    // State 2 (X'y and X'X written): Q^T h' = h to the products' relative 1e-3.
    // h'^T = h^T Q^T, so h^T = h'^T Q. Armadillo's column-major Q is Q^T row-major.
    arma::mat Q = q;
    const auto q_t =
        torch::from_blob(Q.memptr(), {long(q.n_rows), long(q.n_cols)}, torch::kFloat64);
    const auto back = torch::matmul(b.hidden[2].to(torch::kFloat64), q_t.t());
    const auto h = a.hidden[2].to(torch::kFloat64);
    EXPECT_LE(((back - h).abs() / (h.abs().max() + 1.0)).max().item<double>(), 1e-3) << program;
    // And the rotated state is not the plain one: no quantity sits on its own rows.
    EXPECT_GT((b.hidden[2] - a.hidden[2]).abs().max().item<double>(), 1.0) << program;
  }
}

TEST(Construct, RotationRefusesAModelWithLayerNorm) {
  learners::ModelConfig mc;
  mc.d = 2;
  mc.n_max = 3;
  mc.layers = 1;
  mc.hidden = 8;
  mc.heads = 1;
  learners::Transformer m(mc);
  try {
    construct::RotateResidualStream(m, 1);
    ADD_FAILURE() << "a model with LayerNorm was rotated";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.field(), "rotate");
    EXPECT_NE(std::string(e.what()).find("LayerNorm"), std::string::npos) << e.what();
  }
}

TEST(Construct, GdModelPredictsLikeTheGdLearner) {
  const double alpha = 0.05;
  const int d = 4, n = 12;
  const auto c = construct::GdProgram(d, n, alpha);
  analysis::CompareRequest req;
  req.learner_specs = "gd:0.05,ols";
  req.prompts = 2000;
  req.ilwd_prompts = 20;
  req.seed = 5;
  data::TaskConfig task;
  task.d = d;
  task.n = n;
  const auto r = analysis::RunCompare(
      {analysis::TransformerUnderTest("gd", task, construct::Compile(c))}, req);
  ASSERT_EQ(r.entries[0].learner, "gd:0.05");
  for (int k = 0; k < n; ++k)
    EXPECT_LE(r.entries[0].spd.mean(k), 1e-4) << "k=" << k;  // SPD / d
  EXPECT_GT(r.entries[1].spd.mean(n - 1), 1e-2);             // and it is not OLS
}

// The library names the setting ("program"), not the option (libraries know no option names;
// docs/design.md "Folders and layering"): the program renders it as --program.
TEST(Construct, BadProgramIsAnInputErrorNamingTheSetting) {
  for (const char* program :
       {"ridge", "gd:0", "gd:x", "gd:17", "gd:", "newton", "newton:3", "newton:0:0.1",
        "newton:21:0.1", "newton:3:0", "newton:3:-1", "newton:3:inf", "newton:3:0.1:-0.5",
        "newton:3:0.1:nan", "newton:3:0.1:0.2:4", "newton:x:0.1"}) {
    try {
      construct::ParseProgram(program);
      ADD_FAILURE() << program << " was accepted";
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.field(), "program") << program;
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(construct::ParseProgram("gd").steps, 1);
  EXPECT_EQ(construct::ParseProgram("gd:16").steps, 16);
  const auto n = construct::ParseProgram("newton:12:0.03:0.25");
  EXPECT_EQ(n.kind, construct::Program::kNewton);
  EXPECT_EQ(n.steps, 12);
  EXPECT_EQ(n.start, 0.03);
  EXPECT_EQ(n.lambda, 0.25);
  EXPECT_EQ(n.text, "newton:12:0.03:0.25");
  EXPECT_EQ(construct::ParseProgram("newton:3:0.5").lambda, 0.0);
}

TEST(Construct, CliWritesACheckpointWithItsConstruction) {
  TempDir tmp;
  const auto r =
      RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 5 --out " + (tmp / "gd.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The record reads back through its owner (construct::ReadConstruction) and inspect shows it.
  const auto c = construct::ReadConstruction(tmp / "gd.h5");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->program, "gd");
  EXPECT_EQ(c->alpha, 0.05);
  EXPECT_EQ(c->steps, 1);
  bool xty = false;
  for (const auto& q : c->quantities)
    if (q.name == "xty") {
      xty = true;
      EXPECT_EQ(q.layer, 2);
    }
  EXPECT_TRUE(xty);
  EXPECT_EQ(c->layout.at("xty").size, 3);  // d rows
  EXPECT_FALSE(c->ops.empty());
  const auto info = RunIclprobe("inspect " + (tmp / "gd.h5"));
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("construction program gd"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("xty"), std::string::npos) << info.out;
  for (const char* program : {"ridge", "gd:0", "gd:x", "gd:17"}) {
    const auto bad =
        RunIclprobe(std::string("construct --program ") + program + " --out " + (tmp / "r.h5"));
    EXPECT_EQ(bad.exit_code, 2) << program;
    EXPECT_NE(bad.err.find("--program"), std::string::npos) << program;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "r.h5"));
  ASSERT_EQ(
      RunIclprobe("construct --program gd:3 --alpha 0.02 --d 3 --n 5 --out " + (tmp / "gd3.h5"))
          .exit_code,
      0);
  const h5::File f3 = h5::File::Open(tmp / "gd3.h5");
  EXPECT_EQ(f3.OpenGroup("construction/quantities/w_3").GetInt("layer"), 4);
  EXPECT_EQ(f3.OpenGroup("construction/quantities/xtx").GetInt("layer"), 2);
  EXPECT_EQ(f3.OpenGroup("construction/quantities/pred").GetInt("layer"), 5);
  EXPECT_EQ(f3.OpenGroup("construction/quantities/w_2").GetInt("last_layer"), 3);  // overwritten
  EXPECT_EQ(f3.OpenGroup("construction/quantities/w_3").GetInt("last_layer"), 5);
  EXPECT_EQ(f3.OpenGroup("construction/quantities/pred_1").GetInt("layer"), 3);
  // newton: its settings, the rotation, and the convergence count on the screen.
  const auto nw = RunIclprobe(
      "construct --program newton:4:0.05:0.25 --rotate 3 --d 3 --n 5 --out " + (tmp / "nw.h5"));
  ASSERT_EQ(nw.exit_code, 0) << nw.err;
  EXPECT_NE(nw.out.find("pairs"), std::string::npos) << nw.out;
  const auto rn = construct::ReadConstruction(tmp / "nw.h5");
  ASSERT_TRUE(rn.has_value());
  EXPECT_EQ(rn->program, "newton:4:0.05:0.25");
  EXPECT_EQ(rn->steps, 4);
  EXPECT_EQ(rn->start, 0.05);
  EXPECT_EQ(rn->lambda, 0.25);
  ASSERT_TRUE(rn->rotation_seed.has_value());
  EXPECT_EQ(*rn->rotation_seed, 3u);
  const auto info_n = learners::ReadCheckpointInfo(tmp / "nw.h5");
  EXPECT_EQ(info_n.model.layers, 2 * 4 + 4);
  EXPECT_TRUE(arma::approx_equal(rn->rotation, construct::RandomOrthogonal(info_n.model.hidden, 3),
                                 "absdiff", 0.0));
  const auto shown = RunIclprobe("inspect " + (tmp / "nw.h5"));
  EXPECT_NE(shown.out.find("start C 0.05, lambda 0.25"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("rotated (seed 3)"), std::string::npos) << shown.out;
  // Options that do not go together, or values out of range: one line, exit 2, no file.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--program newton:4:0.05 --alpha 0.1", "--alpha: applies to the gd programs only"},
      {"--program gd --rotate 2 --init-only", "--rotate: a random-init model"},
      {"--program newton:4:0", "--program: expected newton:K:C"},
      {"--program newton:25:0.1", "--program: expected newton:K:C"},
      {"--program newton:4:0.1:-1", "--program: expected newton:K:C"},
      {"--program gd --check-prompts -1", "--check-prompts"},
      {"--program gd --distractors 100000", "--distractors: expected 0..188"},
      {"--program gd --context-distractors 35", "--context-distractors: expected 0..34"},
      {"--program gd --context-distractors -1", "--context-distractors: expected a count >= 0"},
      {"--program gd:2 --decoy xtx", "--decoy: a decoy of 'xtx' is not built"},
      {"--program gd --nuisance -2", "--nuisance: expected a finite sigma"},
      {"--program gd --decoy-noise 1", "--decoy-noise: is the decoy's own nuisance"},
      {"--program gd --decoy xty --decoy-noise -1", "--decoy-noise: expected a finite sigma"},
  };
  for (const auto& [args, message] : refused) {
    const auto bad = RunIclprobe("construct " + args + " --out " + (tmp / "bad.h5"));
    EXPECT_EQ(bad.exit_code, 2) << args;
    EXPECT_EQ(test::CountLines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << ": " << bad.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad.h5")) << args;
  }
}

// Ground truth for the probes: on the gd model, X'y is linear in the state after block 2 (rows
// `xty`) and in no earlier state; X'X is never computed. Ridge and the attention-pooled linear
// probe must say so, report's onset must name block 2, and the pooled probe must attend to the
// position the construction wrote (the y-token of example k, 2k - 1).
TEST(Construct, ProbesFindXtyExactlyWhereTheConstructionWroteIt) {
  TempDir tmp;
  auto ok = [](const test::CommandResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + (tmp / "gd.h5")));
  ok(RunIclprobe("construct --program gd --d 3 --n 6 --init-only --seed 2 --out " +
                 (tmp / "init.h5")));
  for (const std::string& m : std::vector<std::string>{"gd", "init"})
    ok(RunIclprobe("extract -c " + (tmp / (m + ".h5")) +
                   " --prompts 2000 --threads 1 --quiet --out " + (tmp / ("acts_" + m + ".h5"))));
  ok(RunIclprobe("probe -a " + (tmp / "acts_gd.h5") + " --control " + (tmp / "acts_init.h5") +
                 " --targets xty,xtx --probes ridge --k 3,6 --threads 1 --quiet --out " +
                 (tmp / "p.h5") + " --csv " + (tmp / "p.csv")));
  const auto r = probes::ReadProbesFile(tmp / "p.h5");
  const arma::cube& xty = *r.Find("xty", "ridge", "model", "r2");  // (seed, k, layer)
  const arma::cube& xtx = *r.Find("xtx", "ridge", "model", "r2");
  const arma::cube& xtx_init = *r.Find("xtx", "ridge", "acts_init", "r2");
  for (arma::uword ki = 0; ki < 2; ++ki) {
    // The xty rows hold X'y up to the mul primitive's relative error (< 1e-3, see above):
    // R2 >= 1 - (1e-3)^2 at the layer that writes them and after.
    EXPECT_GE(xty(0, ki, 2), 0.999) << "k index " << ki;
    EXPECT_GE(xty(0, ki, 3), 0.999) << "k index " << ki;
    // Before block 2 only the last example's y_k x_k is there: clearly below.
    EXPECT_LT(xty(0, ki, 0), 0.5);
    EXPECT_LT(xty(0, ki, 1), 0.9);
    // X'X is never computed: no layer beats the random-init control by more than noise.
    for (arma::uword l = 0; l < 4; ++l)
      EXPECT_LT(xtx(0, ki, l) - xtx_init(0, ki, l), 0.05) << "layer " << l;
  }
  const auto rep = ok(RunIclprobe("report --probes " + (tmp / "p.h5") + " --k 6 --threshold 0.99"));
  EXPECT_NE(rep.out.find("xty: decodable from layer 2 (ridge"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("xtx: not decodable"), std::string::npos) << rep.out;
  // The attention-pooled linear probe: reads X'y too, from the position the construction wrote.
  ok(RunIclprobe("probe -a " + (tmp / "acts_gd.h5") +
                 " --targets xty --probes linear --k 3 --layers 2 --epochs 60 --threads 1 --quiet "
                 "--out " +
                 (tmp / "lin.h5")));
  const auto lin = probes::ReadProbesFile(tmp / "lin.h5");
  EXPECT_GE((*lin.Find("xty", "linear", "model", "r2"))(0, 0, 0), 0.99);
  const arma::vec alpha = lin.alpha.at("xty/linear/model").col(0);
  EXPECT_EQ(alpha.index_max(), 2u * 3 - 1) << alpha.t();
  EXPECT_GT(alpha(2 * 3 - 1), 0.5) << alpha.t();
}

// Ground truth for the query position: on the gd model block 2 writes X'y at the
// x-token of example k+1 as well (the mean of y x over positions <= t times their count), and
// block 3 reads it there (pred = 2 alpha x_{k+1}^T X'y). Probed there (`--at query`), X'y is
// exact from layer 2 on, and absent before: at the x-token, blocks 0-1 hold x_{k+1} and a y x
// of 0, independent of X'y (the 200 test prompts then give |R2| of sampling size, well under
// 0.05). The state probe at layer 1 holds y_k x_k, a part of X'y: the two positions differ.
TEST(Construct, QueryProbesReadXtyAtTheXTokenWhereBlock3ReadsIt) {
  TempDir tmp;
  auto ok = [](const test::CommandResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + (tmp / "gd.h5")));
  ok(RunIclprobe("extract -c " + (tmp / "gd.h5") + " --prompts 2000 --threads 1 --quiet --out " +
                 (tmp / "acts.h5")));
  ok(RunIclprobe("probe -a " + (tmp / "acts.h5") +
                 " --targets xty --probes ridge --at both --threads 1 --quiet --out " +
                 (tmp / "p.h5")));
  const auto r = probes::ReadProbesFile(tmp / "p.h5");
  EXPECT_EQ(r.ks, (std::vector<int>{1, 2, 3, 4, 5}));                // k = n has no query token
  const arma::cube& state = *r.Find("xty", "ridge", "model", "r2");  // (seed, k, layer)
  const arma::cube& query = *r.Find("xty.query", "ridge", "model", "r2");
  for (arma::uword ki = 1; ki < 5; ++ki) {
    EXPECT_GE(query(0, ki, 2), 0.999) << "k index " << ki;
    EXPECT_GE(query(0, ki, 3), 0.999) << "k index " << ki;
    EXPECT_LT(std::abs(query(0, ki, 0)), 0.05) << "k index " << ki;
    EXPECT_LT(std::abs(query(0, ki, 1)), 0.05) << "k index " << ki;
    EXPECT_GT(state(0, ki, 1), 0.1) << "k index " << ki;  // y_k x_k of X'y at the y-token
  }
  const auto rep = ok(RunIclprobe("report --probes " + (tmp / "p.h5") + " --k 4 --threshold 0.99"));
  EXPECT_NE(rep.out.find("xty.query: decodable from layer 2 (ridge"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("TARGET.query at the x-token of example k+1"), std::string::npos)
      << rep.out;
}

// Ground truth for every iterate: on gd:3 and newton:3 (plain and rotated) a ridge
// probe finds each iterate w_t, stored as a learner target, with R2 >= 0.999 in the state the
// construction says holds it and below 0.99 in the state before, and X'X likewise. k <= d + 2:
// for large k, X'X ~ k I makes every iterate nearly a multiple of X'y. The programs' settings
// make consecutive iterates differ: alpha = 0.05 (2 alpha lambda_max(X'X) up to ~3.5 at k = 6,
// so each step moves w by a sizeable fraction) and C = 0.07 (C times the spread of A's
// eigenvalues spans 0.02..2, so the gains (1 - (1 - C mu)^(2^t)) / mu differ in shape from
// step to step). Both hold whether or not a prompt's iteration converges: the iterates are
// polynomials in the prompt that the program and the learner compute alike.
TEST(Construct, ProbesFindEveryIterateWhereTheConstructionWroteIt) {
  TempDir tmp;
  auto ok = [](const test::CommandResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  struct Case {
    std::string program, alpha, ks;
    std::vector<std::string> specs, targets;
  };
  const std::vector<Case> cases = {
      {"gd:3",
       "--alpha 0.05 ",
       "2,4,6",
       {"gd:0.05", "gd:0.05:2", "gd:0.05:3"},
       {"w_gd_0.05", "w_gd_0.05_2", "w_gd_0.05_3"}},
      {"newton:3:0.07:0.25",
       "",
       "4,6",
       {"newton:1:0.07:0.25", "newton:2:0.07:0.25", "newton:3:0.07:0.25"},
       {"w_newton_1_0.07_0.25", "w_newton_2_0.07_0.25", "w_newton_3_0.07_0.25"}},
  };
  for (const auto& c : cases)
    for (const std::string rotate : {"", "--rotate 5 --distractors 64 --decoy xty "}) {
      const std::string what = c.program + " " + rotate;
      const std::string ck = tmp / "m.h5", acts = tmp / "a.h5", probes = tmp / "p.h5";
      ok(RunIclprobe("construct --program " + c.program + " " + c.alpha + rotate +
                     "--d 4 --n 12 --check-prompts 0 --force --out " + ck));
      std::string specs, targets = "xtx,xty";
      for (std::size_t t = 0; t < c.specs.size(); ++t)
        specs += (t ? "," : "") + c.specs[t], targets += "," + c.targets[t];
      ok(RunIclprobe("extract -c " + ck + " --prompts 2000 --threads 1 --quiet --force " +
                     "--learner-targets " + specs + " --out " + acts));
      ok(RunIclprobe("probe -a " + acts + " --targets " + targets + " --probes ridge --k " + c.ks +
                     " --threads 1 --quiet --force --out " + probes));
      const auto record = construct::ReadConstruction(ck);
      ASSERT_TRUE(record.has_value());
      EXPECT_EQ(record->rotation_seed.has_value(), !rotate.empty());
      auto layer_of = [&](const std::string& name) {
        for (const auto& q : record->quantities)
          if (q.name == name) return q.layer;
        ADD_FAILURE() << what << ": no quantity " << name;
        return 1;
      };
      const auto r = probes::ReadProbesFile(probes);
      auto check = [&](const std::string& target, int layer) {
        const arma::cube& r2 = *r.Find(target, "ridge", "model", "r2");  // (seed, k, layer)
        for (arma::uword ki = 0; ki < r2.n_cols; ++ki) {
          EXPECT_GE(r2(0, ki, layer), 0.999) << what << target << " k index " << ki;
          EXPECT_LT(r2(0, ki, layer - 1), 0.99) << what << target << " k index " << ki;
        }
      };
      check("xtx", layer_of("xtx"));
      check("xty", layer_of("xty"));
      for (std::size_t t = 0; t < c.targets.size(); ++t)
        check(c.targets[t], layer_of("w_" + std::to_string(t + 1)));
    }
}

namespace {

// Prompts of the d = 4, n = 12 task and their tokens.
struct Prompts {
  data::PromptSet set;
  torch::Tensor tokens;
  Prompts(std::uint64_t seed, std::size_t count) {
    data::TaskConfig task;
    task.d = 4;
    task.n = 12;
    set = data::SamplePrompts(task, seed, 0, count);
    tokens = data::TokenTensor(set, 0, set.size());
  }
};

// Runs a compiled model on prompts and returns its states and predictions.
learners::ForwardResult RunModel(learners::Transformer& m, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  return m->Run(tokens, fo);
}

// Rows `r` of state [B, T, H] at the y-token of example k (position 2k - 1), float64 [B, |r|].
torch::Tensor RowsAfterK(const torch::Tensor& state, construct::Rows r, int k) {
  return state.select(1, 2 * k - 1).slice(1, r.begin, r.begin + r.size).to(torch::kFloat64);
}

// X_k^T y_k of prompts [B, d], from the prompt set.
torch::Tensor XtyAfterK(const data::PromptSet& set, int k) {
  const int d = set.task.d;
  auto out = torch::zeros({long(set.size()), d}, torch::kFloat64);
  for (std::size_t i = 0; i < set.size(); ++i)
    for (int e = 0; e < k; ++e)
      for (int j = 0; j < d; ++j)
        out[i][j] += set.y(e, i) * set.x(j, e, i);
  return out;
}

}  // namespace

// --decoy xty: rows decoy_xty hold M X'y at block 2 (the product's relative 1e-3, as xty), and
// nothing reads them: zeroing them in state 2 leaves every prediction bit for bit (every weight
// that reads those rows is zero, and adding exact zeros changes no float sum), while zeroing the
// used copy changes them.
TEST(Construct, DecoyHoldsAnUnusedCopyOfXty) {
  const int d = 4, n = 12, k = 5;
  const Prompts prompts(12, 200);
  const auto& set = prompts.set;
  const auto& tokens = prompts.tokens;
  construct::Disguise g;
  g.decoy = "xty";
  g.seed = 4;
  for (const std::string program : {"gd", "gd:3", "newton:4:0.05:0.25"}) {
    const auto c = construct::BuildProgram(construct::ParseProgram(program), d, n, 0.02, g);
    auto m = construct::Compile(c);
    const auto r = RunModel(m, tokens);
    const arma::mat M = arma::reshape(arma::mat(c.decoy_map), d, d).t();  // row-major -> M
    EXPECT_GT(arma::cond(M), 1.0 + 1e-3);  // not a multiple of the identity
    EXPECT_LE(arma::cond(M), 4.0 + 1e-9);
    const auto xty = XtyAfterK(set, k);
    const auto Mt = torch::from_blob(const_cast<double*>(M.memptr()), {d, d},
                                     torch::kFloat64);  // M^T row-major
    const auto want = torch::matmul(xty, Mt);           // rows M xty
    const auto got = RowsAfterK(r.hidden[2], c.layout["decoy_xty"], k);
    EXPECT_LE(((got - want).abs() / (want.abs().max() + 1.0)).max().item<double>(), 1e-3)
        << program;
    torch::NoGradGuard no_grad;
    auto cut = [&](const std::string& rows) {
      auto h = r.hidden[2].clone();
      h.slice(2, c.layout[rows].begin, c.layout[rows].begin + c.layout[rows].size).zero_();
      return m->RunFrom(2, h);
    };
    EXPECT_TRUE(torch::equal(cut("decoy_xty"), r.predictions)) << program;
    EXPECT_GT((cut("xty") - r.predictions).abs().max().item<double>(), 0.1) << program;
  }
}

// --context-distractors q: d^2 + 5q rows that nothing reads (zeroing them after block 1 or 2
// leaves every prediction bit for bit), holding x_k x_k^T at the y-token of
// example k (each product to the relative 1e-3 of the noisy decoy's test), and functions of the
// x's alone: the same prompts with every y negated (w -> -w, so X'y -> -X'y) leave them bit for
// bit, so no quantity linear in w correlates with them.
TEST(Construct, ContextDistractorsAreUnreadFeaturesOfTheXsAlone) {
  const int d = 4, n = 12, k = 5, q = 20;
  const Prompts prompts(15, 300);
  construct::Disguise g;
  g.context_distractors = q;
  const auto spec = construct::ParseProgram("gd");
  const auto c = construct::BuildProgram(spec, d, n, 0.02, g);
  const auto plain_c = construct::BuildProgram(spec, d, n, 0.02);
  ASSERT_EQ(c.model.hidden, plain_c.model.hidden + d * d + 5 * q);
  auto m = construct::Compile(c);
  const auto r = RunModel(m, prompts.tokens);
  const int begin = c.layout["ctx_xx"].begin;
  const int end = c.layout["ctx_vs"].begin + c.layout["ctx_vs"].size;
  ASSERT_EQ(end - begin, d * d + 5 * q);
  torch::NoGradGuard no_grad;
  for (int state : {1, 2}) {
    auto h = r.hidden[state].clone();
    h.slice(2, begin, end).zero_();
    EXPECT_TRUE(torch::equal(m->RunFrom(state, h), r.predictions)) << "state " << state;
  }
  const auto xx = RowsAfterK(r.hidden[2], c.layout["ctx_xx"], k);  // [N, d^2]
  for (std::size_t i = 0; i < prompts.set.size(); ++i)
    for (int a = 0; a < d; ++a)
      for (int b = 0; b < d; ++b) {
        const double want = prompts.set.x(a, k - 1, i) * prompts.set.x(b, k - 1, i);
        EXPECT_NEAR(xx[i][a * d + b].item<double>(), want, 1e-3 * (std::abs(want) + 1.0));
      }
  auto flipped = prompts.tokens.clone();
  flipped.select(2, 0).neg_();  // y sits in the first column of the y-tokens (0 at x-tokens)
  const auto f = RunModel(m, flipped);
  for (int state : {1, 2})
    EXPECT_TRUE(
        torch::equal(f.hidden[state].slice(2, begin, end), r.hidden[state].slice(2, begin, end)))
        << "state " << state;
  g.context_distractors = -1;
  EXPECT_THROW(construct::BuildProgram(spec, d, n, 0.02, g), core::InputError);
}

// --decoy xty --decoy-noise sigma: the decoy rows hold M X'y + sigma (R x_k)^2 (each product to
// the relative 1e-3 of the plain decoy's), the decoy is still read by nothing (zeroing its rows
// leaves every prediction bit for bit), and the noise makes it a copy that is not collinear with
// X'y across prompts (its residual after the best linear map from X'y has sigma^2 Var((R x)^2_j)
// = 2 sigma^2 per entry, far from 0).
TEST(Construct, NoisyDecoyCarriesItsOwnNuisanceAndIsStillUnread) {
  const int d = 4, n = 12, k = 5;
  const Prompts prompts(12, 400);
  const auto& set = prompts.set;
  construct::Disguise g;
  g.decoy = "xty";
  g.decoy_noise = 1.5;
  g.seed = 4;
  const auto c = construct::BuildProgram(construct::ParseProgram("gd"), d, n, 0.02, g);
  auto m = construct::Compile(c);
  const auto r = RunModel(m, prompts.tokens);
  const arma::mat M = arma::reshape(arma::mat(c.decoy_map), d, d).t();
  const arma::mat R = arma::reshape(arma::mat(c.decoy_noise_map), d, d).t();
  const arma::mat Xty = arma::mat(XtyAfterK(set, k).contiguous().data_ptr<double>(), d,
                                  set.size())
                            .t();  // [N, d]
  arma::mat want = Xty * M.t();
  for (std::size_t i = 0; i < set.size(); ++i) {
    arma::vec x(d);
    for (int j = 0; j < d; ++j)
      x(j) = set.x(j, k - 1, i);
    want.row(i) += g.decoy_noise * arma::square(R * x).t();
  }
  const auto got_t = RowsAfterK(r.hidden[2], c.layout["decoy_xty"], k).contiguous();
  const arma::mat got = arma::mat(got_t.data_ptr<double>(), d, set.size()).t();
  EXPECT_LE(arma::abs(got - want).max() / (arma::abs(want).max() + 1.0), 1e-3);
  // Least squares of the decoy on X'y (with an intercept) leaves the noise: mean square
  // residual near 2 sigma^2 = 4.5 (over 400 prompts; bound half of it).
  const arma::mat A = arma::join_rows(arma::ones(set.size()), Xty);
  const arma::mat resid = got - A * arma::solve(A, got);
  EXPECT_GT(arma::accu(arma::square(resid)) / resid.n_elem, 0.5 * 2 * 1.5 * 1.5);
  torch::NoGradGuard no_grad;
  auto h = r.hidden[2].clone();
  const auto rows = c.layout["decoy_xty"];
  h.slice(2, rows.begin, rows.begin + rows.size).zero_();
  EXPECT_TRUE(torch::equal(m->RunFrom(2, h), r.predictions));
  g.decoy = "";
  EXPECT_THROW(construct::BuildProgram(construct::ParseProgram("gd"), d, n, 0.02, g),
               core::InputError);
}

// --nuisance sigma: after block 2 the xty rows hold X'y + sigma (P x_k)^2, far from X'y; one MLP
// later they hold X'y again, and the predictions are those of the plain program up to float32
// rounding. The product (P x)_j^2 is read from GELU pairs at the scale s = 0.02 / 12 (Mul's reach
// over its range): (g(s a) + g(-s a)) / (k s^2), whose terms are as large as
// |s a| / (k s^2) = |a| / (k s) ~ 6 / (0.8 * 1.7e-3) ~ 4.5e3 and cancel to a^2. Four such terms
// per entry (two squares), summed by the fc2 GEMM in an order its kernels choose, round to at
// most 4 u * 4 * 4.5e3 ~ 4.3e-3, and the add (block 2) and the removal (block 3) round
// independently: an X'y entry is off by up to 2 sigma 4.3e-3 ~ 3.5e-2, |dX'y| <= 7e-2 over
// d = 4. A gd prediction alpha x' X'y (alpha = 0.02, |x| <= 4) moves by at most 5.6e-3, SPD/d
// <= 8e-6 (the kernels seen: 1e-8 to 4e-8); bound 1e-5. A nuisance left in would give SPD/d
// ~ (alpha sigma |x| |P x|^2)^2 / d ~ 0.1.
TEST(Construct, NuisanceIsRemovedExactlyOneMlpLater) {
  const int d = 4, n = 12, k = 5;
  const Prompts prompts(13, 300);
  const auto& set = prompts.set;
  const auto& tokens = prompts.tokens;
  construct::Disguise g;
  g.nuisance = 4;
  for (const std::string program : {"gd", "gd:3", "newton:4:0.05:0.25"}) {
    const auto spec = construct::ParseProgram(program);
    const auto c = construct::BuildProgram(spec, d, n, 0.02, g);
    auto m = construct::Compile(c);
    auto plain = construct::Compile(construct::BuildProgram(spec, d, n, 0.02));
    const auto r = RunModel(m, tokens), p = RunModel(plain, tokens);
    const auto xty = XtyAfterK(set, k);
    const auto at2 = RowsAfterK(r.hidden[2], c.layout["xty"], k);
    const auto at3 = RowsAfterK(r.hidden[3], c.layout["xty"], k);
    // sigma (P x_k)^2 has mean sigma = 4 per entry: far from X'y at block 2, X'y at block 3.
    EXPECT_GT((at2 - xty).abs().mean().item<double>(), 1.0) << program;
    // The nuisance's rounding (above: 3.5e-2) plus the plain program's own precision on X'y
    // (relative 1e-3 of the largest entry, as the tests of the plain programs bound it).
    const double plain_precision = 1e-3 * (xty.abs().max().item<double>() + 1.0);
    EXPECT_LE((at3 - xty).abs().max().item<double>(), 3.5e-2 + plain_precision) << program;
    const auto diff = (r.predictions - p.predictions).to(torch::kFloat64);
    // gd and gd:3 (its later steps have gains of order 1): see above, 1e-5. Newton's matrix
    // products run at their precision (relative 1e-3, MatMatProductWithinItsDerivedBound), and
    // the disguised model's wider GEMMs round differently from the plain model's: the two
    // differ by that precision, (1e-3)^2 E[y^2] / d = 1e-6, the scale of the program's own
    // distance from the classical learner; bound 1e-5.
    const double bound = 1e-5;
    EXPECT_LE((diff * diff).mean(0).max().item<double>() / d, bound) << program;
    for (const auto& q : c.quantities)
      if (q.name == "xty") {
        EXPECT_EQ(q.layer, 3) << program;
      }
  }
}

// --distractors N: N rows of per-token features of the computed quantities' size, read by
// nothing; the predictions are the plain program's up to the rounding of sums over a wider
// GEMM (SPD/d <= 1e-8); more than 4 times the program's width is refused.
TEST(Construct, DistractorsAreUnreadFeaturesOfTheirStatedSize) {
  const int d = 4, n = 12;
  const Prompts prompts(14, 300);
  const auto& tokens = prompts.tokens;
  construct::Disguise g;
  g.distractors = 42;  // 10 of each kind and 2 linear rows more
  const auto spec = construct::ParseProgram("gd:3");
  const auto c = construct::BuildProgram(spec, d, n, 0.02, g);
  const auto plain_c = construct::BuildProgram(spec, d, n, 0.02);
  EXPECT_EQ(c.model.hidden, plain_c.model.hidden + 42);
  EXPECT_EQ(c.model.layers, plain_c.model.layers);
  auto m = construct::Compile(c);
  auto plain = construct::Compile(plain_c);
  const auto r = RunModel(m, tokens), p = RunModel(plain, tokens);
  const auto diff = (r.predictions - p.predictions).to(torch::kFloat64);
  EXPECT_LE((diff * diff).mean(0).max().item<double>() / d, 1e-8);
  // Linear rows: expected variance 9/2 at x- and y-tokens alike (rms 2.1; each row's own
  // variance is a chi-square draw of its map, so [1, 5] for the rms over rows); squares and
  // products: E[a^2] = 9/2 and E[a^4] = 3 (9/2)^2 (rms 7.8; heavier over rows: [1, 30]).
  for (const char* rows : {"dist_a", "dist_b", "dist_c", "dist_sq", "dist_prod"}) {
    const auto r2 = c.layout[rows];
    const auto v = r.hidden[2].slice(2, r2.begin, r2.begin + r2.size).to(torch::kFloat64);
    const double rms = v.pow(2).mean().sqrt().item<double>();
    const bool product = std::string(rows) == "dist_sq" || std::string(rows) == "dist_prod";
    EXPECT_GT(rms, 1.0) << rows;
    EXPECT_LT(rms, product ? 30.0 : 5.0) << rows;
  }
  g.distractors = 4 * plain_c.model.hidden + 1;
  EXPECT_THROW(construct::BuildProgram(spec, d, n, 0.02, g), core::InputError);
  g.distractors = 0;
  g.decoy = "xtx";
  EXPECT_THROW(construct::BuildProgram(spec, d, n, 0.02, g), core::InputError);
  g.decoy = "";
  g.nuisance = -1;
  EXPECT_THROW(construct::BuildProgram(spec, d, n, 0.02, g), core::InputError);
}
