// Ground truth for `iclprobe trace`: on compiled gd:K and newton:K programs, where every block
// that updates w writes its prediction into the row the readout reads, matching each layer's
// lens prediction to the algorithms' iterates recovers the compiled schedule, and the rate tells
// a second-order method from GD.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/trace.hpp"
#include "analysis/trace_file.hpp"
#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "data/task.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using test::Task;

// The iterate each state holds: the last pred_t written at or before layer l (0 before any).
std::vector<int> CompiledSchedule(const construct::Construction& c) {
  std::vector<int> at(c.model.layers + 1, 0);
  for (const auto& q : c.quantities)
    if (q.name.rfind("pred_", 0) == 0) {
      const int t = std::stoi(q.name.substr(5));
      for (int l = q.layer; l <= c.model.layers; ++l)
        at[l] = std::max(at[l], t);
    }
  return at;
}

// 1 - sum (a - b)^2 / sum (a^2 + b^2) between two iterates' predictions.
double IterateSimilarity(const arma::cube& it, int s, int t) {
  const arma::mat a = it.slice(s), b = it.slice(t);
  return 1.0 - arma::accu(arma::square(a - b)) / arma::accu(arma::square(a) + arma::square(b));
}

std::vector<int> Ks(int lo, int hi) {
  std::vector<int> ks;
  for (int k = lo; k <= hi; ++k)
    ks.push_back(k);
  return ks;
}

// Checks the match of a compiled program's layers to `algorithm`, whose iterate t is the
// compiled iterate schedule(t) maps to (identity for the program's own family).
// `rotated`: in a random basis every row of the residual stream mixes into the one the readout
// reads, so where nothing is written yet (iterate 0) the lens reads float32 rounding of rows as
// large as X'X, where the plain model reads 0. Worst case: the readout's dot product over H rows
// of a state of norm |h|_2 is off by up to gamma_H |h|_2 (gd:4: H = 91, |h|_2 <= 77 on these
// prompts, 4e-4; newton:3: H = 123, |h|_2 <= 72, 5e-4), and each block before it adds its GEMMs'
// rounding of the same order to the residual stream: up to ~1.5e-3 ~ 7e-4 |y| (rms y ~ 2.2) by
// layer 5. How much of that worst case a run reaches depends on the BLAS kernels' summation
// order (about 1e-4 |y| with SkylakeX, 3e-4 with Haswell). Against iterate 0 the spd floor
// 1e-6 y^2 then gives 1 - a^2 / (a^2 + 1e-6 y^2) >= 1 - 0.49 / 1.49 = 0.67; bound 0.6.
void ExpectSchedule(const analysis::IterateMatch& m, const std::vector<int>& want,
                    const arma::cube& iterates, const std::string& what, bool rotated = false) {
  const int T = int(iterates.n_slices) - 1;
  for (std::size_t l = 0; l < want.size(); ++l) {
    const int t = want[l];
    SCOPED_TRACE(what + " layer " + std::to_string(l) + " iterate " + std::to_string(t));
    // float32 weights and activations: the prediction x^T w_t differs from the float64 iterate
    // by ~1e-6 relative (the construct tests bound SPD / d by 1e-7), so 1 - sim <= 1e-6 << 1e-3.
    EXPECT_GE(m.spd(l, t), rotated && t == 0 ? 0.6 : 0.999);
    EXPECT_EQ(m.best(l), t);
    EXPECT_EQ(m.best_lo(l), t);
    EXPECT_EQ(m.best_hi(l), t);
    // One iterate away the similarity is lower by what the two iterates differ, less the
    // float32 error; where they differ by at least 0.1 the margin's interval clears 0.05.
    double gap = INFINITY;
    for (int u : {t - 1, t + 1})
      if (u >= 0 && u <= T) gap = std::min(gap, 1.0 - IterateSimilarity(iterates, t, u));
    if (gap >= 0.1) {
      EXPECT_GE(m.margin_lo(l), 0.05);
    }
    EXPECT_GT(m.margin(l), 0.5 * gap);
  }
}

}  // namespace

// gd:4 (alpha = 0.02: no prompt with 2 alpha lambda_max >= 2 among these), plain and rotated:
// block b + 2 writes iterate b, so state l holds iterate max(0, min(l - 2, 4)); matched to six
// iterates of GD the schedule comes back with its interval, one iteration per block.
TEST(Trace, LensOnCompiledGdRecoversTheScheduleOneIterationPerBlock) {
  const int d = 4, n = 8, K = 4;
  const data::TaskConfig task = Task(d, n);
  auto c = construct::GdProgram(d, n, 0.02, K);
  ASSERT_EQ(construct::CountDivergent(c, task, 5, 300).outside, 0);
  const std::vector<int> want = CompiledSchedule(c);
  ASSERT_EQ(want, (std::vector<int>{0, 0, 0, 1, 2, 3, 4}));
  const data::PromptSet prompts = data::SamplePrompts(task, 5, 0, 300);
  const std::vector<int> ks = Ks(1, n - 1);
  const auto gd = analysis::ParseTraceAlgorithm("gd:0.02:6", task);
  const arma::cube iterates = analysis::IteratePredictions(gd, prompts, ks);
  const arma::mat labels = analysis::TraceLabels(prompts, ks);
  for (const bool rotated : {false, true}) {
    if (rotated) c.rotation_seed = 3;
    learners::Transformer model = construct::Compile(c);
    const arma::cube layers =
        analysis::LayerPredictions(model, prompts, prompts, ks, analysis::Readout::kLens, {});
    const auto m = analysis::MatchIterates({layers}, iterates, labels, 200, 1);
    ExpectSchedule(m, want, iterates, rotated ? "rotated" : "plain", rotated);
    // Layers 3..6 hold iterates 1..4 (inside 1..T-1 = 1..5): exactly one iteration per block.
    EXPECT_EQ(m.rate_layers, 4);
    EXPECT_NEAR(m.rate, 1.0, 1e-12);
    EXPECT_NEAR(m.rate_lo, 1.0, 1e-12);
    EXPECT_NEAR(m.rate_hi, 1.0, 1e-12);
  }
}

// Fu et al.'s readout, a ridge fit of the labels per layer, is not the lens: where the state
// holds only GD's first iterate p_1 = 2 alpha x^T X^T y (layer 3 of gd:4), the best linear
// readout of y is c p_1 with c = E[y p_1] / E[p_1^2] (every other row is uncorrelated with y:
// the query x is independent of the context and has mean 0). One step of alpha = 0.02 shrinks
// w_OLS, so c > 1 (about 2 on these prompts), and c p_1 is nearer later iterates than p_1: the
// fitted readout moves the match past the iterate the layer holds.
TEST(Trace, RidgeReadoutRescalesAnEarlyIterateTowardLaterOnes) {
  const int d = 4, n = 8;
  const data::TaskConfig task = Task(d, n);
  const auto c = construct::GdProgram(d, n, 0.02, 4);
  const data::PromptSet fit = data::SamplePrompts(task, 7, 0, 800),
                        eval = data::SamplePrompts(task, 7, 800, 300);
  const std::vector<int> ks = Ks(1, n - 1);
  const auto gd = analysis::ParseTraceAlgorithm("gd:0.02:6", task);
  const arma::cube iterates = analysis::IteratePredictions(gd, eval, ks);
  // c from the fit prompts' own iterates: well above 1.
  const arma::cube fit_it = analysis::IteratePredictions(gd, fit, ks);
  const arma::mat y_fit = analysis::TraceLabels(fit, ks);
  const double scale =
      arma::accu(y_fit % fit_it.slice(1)) / arma::accu(arma::square(fit_it.slice(1)));
  EXPECT_GT(scale, 1.5);
  learners::Transformer model = construct::Compile(c);
  const arma::cube layers = analysis::LayerPredictions(
      model, fit, eval, ks, analysis::Readout::kRidge, arma::logspace(-6, 2, 9));
  const auto m =
      analysis::MatchIterates({layers}, iterates, analysis::TraceLabels(eval, ks), 200, 4);
  EXPECT_GT(m.best(3), 1);
  EXPECT_GT(m.best_lo(3), 1);
}

// newton:3:C:0 on prompts of k >= d examples (A = X^T X invertible; C = 0.04 and no prompt with
// C lambda_max >= 2): block 2t + 4 writes Newton iterate t. Matched to Newton the schedule comes
// back at half an iteration per block (two blocks per step); matched to GD with 2 alpha = C it
// comes back at GD iterate 2^t (Y_t = A^-1 (I - (I - C A)^(2^t)) is GD's iterate 2^t), so GD's
// rate is one doubling per Newton step: log2_rate 0.5 per block, where gd:K's GD rate is linear.
// Plain and rotated (a random orthogonal basis of the residual stream): the same schedule.
TEST(Trace, CompiledNewtonMatchesNewtonLinearlyAndGdAtPowersOfTwo) {
  const int d = 4, n = 8, K = 3;
  const double C = 0.04;
  const data::TaskConfig task = Task(d, n);
  auto c = construct::NewtonProgram(d, n, K, C, 0.0);
  const std::vector<int> want = CompiledSchedule(c);
  ASSERT_EQ(want, (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 3}));
  const data::PromptSet prompts = data::SamplePrompts(task, 6, 0, 300);
  const std::vector<int> ks = Ks(d, n - 1);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    for (int k : ks) {
      const arma::mat x(const_cast<double*>(prompts.x.slice_memptr(i)), d, k, false, true);
      ASSERT_LT(C * arma::eig_sym(x * x.t()).max(), 2.0);
    }
  const arma::mat labels = analysis::TraceLabels(prompts, ks);
  const auto newton = analysis::ParseTraceAlgorithm("newton:5:0.04:0", task);
  const arma::cube newton_it = analysis::IteratePredictions(newton, prompts, ks);
  const auto gd = analysis::ParseTraceAlgorithm("gd:0.02:16", task);
  const arma::cube gd_it = analysis::IteratePredictions(gd, prompts, ks);
  std::vector<int> want_gd;
  for (int t : want)
    want_gd.push_back(t == 0 ? 0 : 1 << t);
  for (const bool rotated : {false, true}) {
    if (rotated) c.rotation_seed = 5;
    const std::string what = rotated ? "rotated " : "plain ";
    learners::Transformer model = construct::Compile(c);
    const arma::cube layers =
        analysis::LayerPredictions(model, prompts, prompts, ks, analysis::Readout::kLens, {});
    const auto mn = analysis::MatchIterates({layers}, newton_it, labels, 200, 2);
    ExpectSchedule(mn, want, newton_it, what + "newton", rotated);
    // Best iterates 1, 1, 2, 2, 3 at layers 6..10: slope 0.5 exactly.
    EXPECT_NEAR(mn.rate, 0.5, 1e-12);
    const auto mg = analysis::MatchIterates({layers}, gd_it, labels, 200, 3);
    ExpectSchedule(mg, want_gd, gd_it, what + "gd", rotated);
    // Best GD iterates 2, 2, 4, 4, 8: log2 1, 1, 2, 2, 3, slope 0.5; linear slope 1.4.
    EXPECT_NEAR(mg.log2_rate, 0.5, 1e-12);
    EXPECT_NEAR(mg.log2_rate_lo, 0.5, 1e-12);
    EXPECT_NEAR(mg.log2_rate_hi, 0.5, 1e-12);
    EXPECT_NEAR(mg.rate, 1.4, 1e-12);
  }
}

// sgd:ALPHA:T, two known answers: its first pass is the one-pass SGD learner (learners/), and on
// noiseless prompts its passes converge (Kaczmarz) to the minimum-norm least-squares weights,
// whose prediction is OLS's: after 3,000 passes at alpha = 0.05 the contraction per pass,
// 1 - 2 alpha lambda_min(X^T X) / k ~ 0.9 for k >= 6 examples in d = 2, leaves nothing
// above double rounding, so 1e-9 bounds both gaps.
TEST(Trace, SgdPassesStartAtOnePassSgdAndConvergeToOls) {
  const data::TaskConfig task = Task(2, 10);
  const data::PromptSet prompts = data::SamplePrompts(task, 4, 0, 40);
  const std::vector<int> ks = Ks(6, 9);
  const arma::cube it = analysis::IteratePredictions(
      analysis::ParseTraceAlgorithm("sgd:0.05:3000", task), prompts, ks);
  const learners::SgdLearner one(0.05);
  const auto ols = learners::MakeLearner("ols", task);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const arma::mat x(const_cast<double*>(prompts.x.slice_memptr(i)), 2, 10, false, true);
    learners::LearnerRun a, b;
    one.Run(x, prompts.y.col(i), a);
    ols->Run(x, prompts.y.col(i), b);
    for (std::size_t j = 0; j < ks.size(); ++j) {
      EXPECT_NEAR(it(j, i, 1), a.predictions(ks[j]), 1e-9) << "prompt " << i << " k " << ks[j];
      EXPECT_NEAR(it(j, i, 3000), b.predictions(ks[j]), 1e-9) << "prompt " << i << " k " << ks[j];
      EXPECT_EQ(it(j, i, 0), 0.0);
    }
  }
}

// Bad specs name the setting and what was expected.
TEST(Trace, AlgorithmsItCannotIterateAreRefused) {
  const data::TaskConfig task = Task(4, 8);
  for (const std::string bad : {"sgd:0.1", "gd:0.1", "gd:-1:3", "gd:0.1:0", "newton:0",
                                "newton:99999", "ridge-path:1:2:5", "ridge-path:1:0.1"}) {
    try {
      analysis::ParseTraceAlgorithm(bad, task);
      ADD_FAILURE() << bad;
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("algorithms: '" + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  const auto ridge = analysis::ParseTraceAlgorithm("ridge-path:100:0.01:5", task);
  ASSERT_EQ(ridge.lambdas.size(), 5u);
  EXPECT_NEAR(ridge.lambdas[2], 1.0, 1e-12);
  const data::PromptSet prompts = data::SamplePrompts(task, 1, 0, 3);
  EXPECT_THROW(analysis::IteratePredictions(ridge, prompts, {8}), core::InputError);
}

}  // namespace icl

// ---- iclprobe trace, end to end ----

namespace icl {

namespace {

using test::RunIclprobe;
using test::TempDir;

// gd:4 compiled with alpha = 0.02 (d = 4, n = 8), its random-init twin, and the activations of
// each on one prompt set (seed 11, 300 scored + 400 fit prompts), shared by the tests below.
class CliTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const std::string& cmd :
         {"construct --program gd:4 --alpha 0.02 --d 4 --n 8 --out " + P("gd4.h5"),
          "construct --program gd:4 --alpha 0.02 --d 4 --n 8 --init-only --seed 2 --out " +
              P("init.h5"),
          "construct --program gd:4 --alpha 0.03 --d 4 --n 8 --out " + P("other.h5"),
          "extract -c " + P("gd4.h5") + " --prompts 700 --seed 11 --quiet --out " + P("a.h5"),
          "extract -c " + P("init.h5") + " --prompts 700 --seed 11 --quiet --out " + P("ai.h5"),
          "extract -c " + P("gd4.h5") + " --prompts 700 --seed 11 --positions y --quiet --out " +
              P("ay.h5")}) {
      const auto r = RunIclprobe(cmd);
      ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string P(const std::string& name) { return *dir_ / name; }
  static TempDir* dir_;
};
TempDir* CliTrace::dir_ = nullptr;

}  // namespace

// The command recovers the compiled schedule through the lens, pairs the twin as a control, and
// writes a file that reads back with the CSVs beside it.
TEST_F(CliTrace, LensRecoversTheCompiledScheduleAgainstTheTwin) {
  TempDir out;
  const auto r = RunIclprobe("trace -c " + P("gd4.h5") + " --control " + P("init.h5") +
                             " --readout lens --algorithms gd:0.02:6,newton:3 --prompts 300 "
                             "--seed 11 --bootstrap 200 --quiet --out " +
                             (out / "t.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const analysis::TraceResult t = analysis::ReadTraceFile(out / "t.h5", /*predictions=*/true);
  ASSERT_EQ(t.algorithms.size(), 2u);
  EXPECT_EQ(t.algorithms[0].algorithm.spec, "gd:0.02:6");
  EXPECT_EQ(t.request.ks, Ks(1, 7));
  EXPECT_EQ(t.request.layers, Ks(0, 6));
  const analysis::IterateMatch& m = t.algorithms[0].model;
  const std::vector<int> want = {0, 0, 0, 1, 2, 3, 4};
  for (int l = 0; l <= 6; ++l) {
    EXPECT_EQ(m.best(l), want[l]) << "layer " << l;
    EXPECT_GE(m.spd(l, want[l]), 0.999) << "layer " << l;
  }
  EXPECT_NEAR(m.rate, 1.0, 1e-12);
  // The twin's random readout matches no iterate that has computed something: every layer
  // that holds an iterate beats it by a margin whose interval excludes 0.
  ASSERT_EQ(m.excess.n_elem, 7u);
  for (int l = 3; l <= 6; ++l)
    EXPECT_GT(m.excess_lo(l), 0.5) << "layer " << l;
  ASSERT_EQ(t.predictions.size(), 1u);
  ASSERT_EQ(t.control_predictions.size(), 1u);
  EXPECT_EQ(t.predictions[0].n_slices, 7u);
  // CSVs: (2 algorithms x (7 + 4) iterates) x 7 layers x (learner, control) rows; per layer
  // 2 x 7 x 2; rates 2 x 2.
  EXPECT_EQ(test::CountLines(test::ReadFile(out / "t.csv")), 1 + (7 + 4) * 7 * 2);
  EXPECT_EQ(test::CountLines(test::ReadFile(out / "t.layers.csv")), 1 + 2 * 7 * 2);
  EXPECT_EQ(test::CountLines(test::ReadFile(out / "t.rates.csv")), 1 + 2 * 2);
  // report --trace: the table names the compiled schedule, and the figures are drawn.
  const auto rep =
      RunIclprobe("report --trace " + (out / "t.h5") + " --plot-dir " + (out / "figs"));
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("| 3 | 1 [1, 1] | 1.000 [1.000, 1.000] |"), std::string::npos) << rep.out;
  for (const char* f : {"trace_gd_0.02_6_curve.png", "trace_gd_0.02_6_learner_heatmap.svg",
                        "trace_newton_3_control_heatmap.png", "trace_newton_3_curve.csv"})
    EXPECT_TRUE(std::filesystem::exists(out / ("figs/" + std::string(f)))) << f;
  const auto both = RunIclprobe("report --trace " + (out / "t.h5") + " --probes " + (out / "t.h5"));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--trace: reported alone"), std::string::npos) << both.err;
  // Without --force the outputs are not replaced.
  const auto again = RunIclprobe("trace -c " + P("gd4.h5") +
                                 " --readout lens --algorithms gd:0.02:6 --prompts 300 --quiet "
                                 "--out " +
                                 (out / "t.h5"));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
}

// Two independent paths to the same states: a forward pass over the seeded prompts, and the
// activations extract wrote for them. trace runs extract's forward pass on extract's groups of
// the same stream (the scored rows, then the fit rows), so the states, and everything computed
// from them, are the same bits on any BLAS kernels and thread count: 300 scored prompts end
// inside a group, which is run whole and split between the scored and the fit rows.
TEST_F(CliTrace, ActivationsAndForwardPassAgree) {
  TempDir out;
  const std::string common =
      " --algorithms gd:0.02:6 --prompts 300 --fit-prompts 400 "
      "--bootstrap 100 --quiet";
  const auto a = RunIclprobe("trace -c " + P("gd4.h5") + " --control " + P("init.h5") +
                             " --seed 11" + common + " --out " + (out / "fwd.h5"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = RunIclprobe("trace -c " + P("gd4.h5") + " -a " + P("a.h5") + " --control " +
                             P("init.h5") + " --control-activations " + P("ai.h5") + " --seed 11" +
                             common + " --out " + (out / "file.h5"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto f = analysis::ReadTraceFile(out / "fwd.h5", true);
  const auto g = analysis::ReadTraceFile(out / "file.h5", true);
  EXPECT_EQ(g.prompts_from, P("a.h5"));
  ASSERT_TRUE(arma::approx_equal(f.labels, g.labels, "absdiff", 0.0));
  EXPECT_TRUE(arma::approx_equal(f.predictions[0], g.predictions[0], "absdiff", 0.0));
  EXPECT_TRUE(
      arma::approx_equal(f.control_predictions[0], g.control_predictions[0], "absdiff", 0.0));
  EXPECT_TRUE(
      arma::approx_equal(f.algorithms[0].model.spd, g.algorithms[0].model.spd, "absdiff", 0.0));
  // The same on two workers.
  const auto c = RunIclprobe("trace -c " + P("gd4.h5") + " --control " + P("init.h5") +
                             " --seed 11 --threads 2" + common + " --out " + (out / "two.h5"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto t = analysis::ReadTraceFile(out / "two.h5", true);
  EXPECT_TRUE(arma::approx_equal(t.predictions[0], g.predictions[0], "absdiff", 0.0));
}

// Each documented refusal is one line on stderr, exit code 2, and leaves no output behind.
TEST_F(CliTrace, BadInputIsOneLineAndExitTwo) {
  TempDir out;
  const std::string o = " --quiet --out " + (out / "t.h5");
  const std::string c = "trace -c " + P("gd4.h5");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {c + " --algorithms knn:3:4", "unknown algorithm"},
      {c + " --algorithms gd:0.02:5000", "T in 1..4096"},
      {c + " --algorithms gd:-1:4", "step size"},
      {c + " --algorithms newton:0", "newton needs a step count"},
      {c + " --algorithms newton:200", "at most 100"},
      {c + " --algorithms 'gd:0.02: 4'", "only letters, digits"},
      {c + " --algorithms gd:0.02:4,gd:0.02:4", "listed twice"},
      {c + " --k 8", "--k: 8 is outside 0..7"},
      {c + " --layers 9", "--layers: 9 is outside 0..6"},
      {c + " --readout probe", "--readout: expected lens or ridge"},
      {c + " -a " + P("ai.h5"), "extracted from another checkpoint"},
      {c + " -a " + P("ay.h5"), "y-tokens"},
      {c + " -a " + P("a.h5") + " --prompts 600", "holds 700 prompts"},
      {c + " -a " + P("a.h5") + " -a " + P("a.h5"), "--activations: 2 given for 1"},
      {c + " -c " + P("other.h5"), "have the same seed"},
      {c + " --control " + P("init.h5") + " --control " + P("init.h5"), "--control: 2 given"},
      {"trace", "--checkpoint: required"},
  };
  for (const auto& [cmd, want] : cases) {
    const auto r = RunIclprobe(cmd + o);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find(want), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_EQ(test::CountLines(r.err), 1) << cmd << "\n" << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(out.path())) << cmd;
  }
}

}  // namespace icl
