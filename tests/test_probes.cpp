// Probes: known answers for ridge (planted maps, brute-force leave-one-out, streaming), the
// gradient probes (planted nonlinear map), splits and metric definitions.
#include <gtest/gtest.h>

#include "probes/data_access.hpp"
#include "probes/gradient.hpp"
#include "probes/ridge.hpp"
#include "probes/runner.hpp"
#include "tests/test_util.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl::probes;

namespace {

// Fits a ridge probe on all columns of (x, y) given as one block.
RidgeProbe Fit(const arma::mat& x, const arma::mat& y, const arma::vec& lambdas,
               bool standardize = true) {
  FeatureStats fs;
  fs.Init(x.n_rows);
  fs.Add(x);
  TargetStats ts;
  ts.Init(x.n_rows, y.n_rows);
  ts.Add(x, y);
  RidgeProbe p(lambdas, standardize);
  p.Prepare(fs);
  p.Begin(ts);
  p.AccumulateLoo(x, y);
  p.Select();
  return p;
}

double R2(const arma::mat& y, const arma::mat& yhat) {
  arma::mat c = y;
  c.each_col() -= arma::vec(arma::mean(y, 1));
  return 1.0 - arma::accu(arma::square(y - yhat)) / arma::accu(arma::square(c));
}

}  // namespace

TEST(RidgeProbe, RecoversAPlantedLinearMap) {
  arma::arma_rng::set_seed(1);
  const arma::uword p = 4, m = 4, n = 2000;
  const arma::mat target(m, n, arma::fill::randn);
  const arma::mat a(p, m, arma::fill::randn);
  const arma::mat x =
      a * target + 0.01 * arma::mat(p, n, arma::fill::randn);  // features = A target + noise
  const RidgeProbe probe =
      Fit(x, target, arma::join_cols(arma::vec{0.0}, arma::logspace(-6, 3, 10)));
  const arma::mat xt = a * arma::mat(m, 500, arma::fill::randn);
  const arma::mat tt = arma::pinv(a) * xt;  // the targets behind the held-out features (noise-free)
  EXPECT_GT(R2(tt, probe.Predict(xt)), 0.999);
  // The recovered map equals ordinary least squares with an intercept on the same rows.
  const arma::mat design = arma::join_cols(arma::ones<arma::rowvec>(n), x);
  const arma::mat ls = arma::solve(design.t(), target.t());  // (p+1) x m
  EXPECT_LE(probe.lambda(), 1e-4);  // leave-one-out wants (almost) no penalty here
  // The gap to OLS is the penalty's bias, ~lambda / eigval_min(Z^T Z) relative with lambda <=
  // 1e-4 and Z^T Z = n = 2000 times the feature correlation; double rounding (~p * cond * eps)
  // is orders of magnitude below the 1e-4 relative tolerance, so no machine dependence here.
  EXPECT_LT(arma::abs(probe.weights() - ls.rows(1, p)).max(),
            1e-4 * arma::abs(ls.rows(1, p)).max());
  EXPECT_LT(arma::abs(probe.intercept() - ls.row(0).t()).max(), 1e-4);
}

TEST(RidgeProbe, EigenLeaveOneOutEqualsBruteForceForEveryLambda) {
  arma::arma_rng::set_seed(2);
  const arma::uword p = 5, m = 2, n = 30;
  const arma::mat x = arma::randn(p, n) * 2 + 1;
  const arma::mat y = arma::randn(m, p) * x + arma::randn(m, n);
  const arma::vec lambdas = {0.0, 0.01, 0.3, 1, 10, 300};
  const RidgeProbe probe = Fit(x, y, lambdas);
  // Brute force: standardise with the full training statistics (as the probe does), then for each
  // row refit ridge with an unpenalised intercept on the other 29 rows and predict the row.
  const arma::vec mu = arma::mean(x, 1), sd = arma::stddev(x, 1, 1);
  arma::mat z = x;
  z.each_col() -= mu;
  z.each_col() /= sd;
  for (arma::uword l = 0; l < lambdas.n_elem; ++l) {
    double sse = 0;
    for (arma::uword i = 0; i < n; ++i) {
      arma::uvec keep(n - 1);
      for (arma::uword j = 0, c = 0; j < n; ++j)
        if (j != i) keep(c++) = j;
      const arma::mat zk = z.cols(keep), yk = y.cols(keep);
      const arma::vec zm = arma::mean(zk, 1), ym = arma::mean(yk, 1);
      arma::mat zc = zk;
      zc.each_col() -= zm;
      arma::mat yc = yk;
      yc.each_col() -= ym;
      const arma::mat w =
          arma::solve(zc * zc.t() + lambdas(l) * arma::eye(p, p), zc * yc.t());  // p x m
      const arma::vec pred = ym + w.t() * (z.col(i) - zm);
      sse += arma::accu(arma::square(y.col(i) - pred));
    }
    // Double precision, two algorithms (eigendecomposition + exact LOO formula vs 30 separate
    // solves): both ~p * cond * eps relative with cond(Z^T Z) ~ 6 for 29 x 5 Gaussian rows (and
    // smaller once lambda > 0), i.e. ~1e-14; the tolerance 1e-9 * sse is 6e-8 relative.
    EXPECT_NEAR(probe.loo_mse()(l), sse / (n * m), 1e-9 * sse) << "lambda " << lambdas(l);
  }
}

TEST(RidgeProbe, StreamedStatisticsEqualTheInMemoryFit) {
  arma::arma_rng::set_seed(3);
  const arma::mat x = arma::randn(7, 333), y = arma::randn(2, 7) * x + 0.5 * arma::randn(2, 333);
  const arma::vec lambdas = arma::logspace(-2, 2, 7);
  const RidgeProbe whole = Fit(x, y, lambdas);
  FeatureStats fs;
  fs.Init(7);
  TargetStats ts;
  ts.Init(7, 2);
  for (arma::uword b = 0; b < 333; b += 50) {
    FeatureStats part;  // per-block statistics merged, as threads do
    part.Init(7);
    part.Add(x.cols(b, std::min<arma::uword>(b + 49, 332)));
    fs.Merge(part);
    ts.Add(x.cols(b, std::min<arma::uword>(b + 49, 332)),
           y.cols(b, std::min<arma::uword>(b + 49, 332)));
  }
  RidgeProbe streamed(lambdas);
  streamed.Prepare(fs);
  streamed.Begin(ts);
  for (arma::uword b = 0; b < 333; b += 64)
    streamed.AccumulateLoo(x.cols(b, std::min<arma::uword>(b + 63, 332)),
                           y.cols(b, std::min<arma::uword>(b + 63, 332)));
  streamed.Select();
  // Not bit-identical: block-wise sums and merges round differently from one product over all
  // 333 rows. Double precision: statistics agree to ~n * eps ~ 4e-14 relative, and lambda >= 0.01
  // on standardised iid features keeps cond(C + lambda I) ~ 2, so LOO errors (~0.3) and weights
  // (O(1)) agree to ~1e-13: 1e-10 absolute leaves ~1000x. The selected lambda is an argmin over a
  // grid whose neighbouring LOO values differ far more than that, so it is the same.
  EXPECT_EQ(streamed.lambda(), whole.lambda());
  EXPECT_LT(arma::abs(streamed.loo_mse() - whole.loo_mse()).max(), 1e-10);
  EXPECT_LT(arma::abs(streamed.weights() - whole.weights()).max(), 1e-10);
}

TEST(RidgeProbe, AgreesWithScikitLearn) {
  // Fixture made once by tests/fixtures/make_sklearn_ridge.py with Debian's python3-sklearn.
  const std::string dir = std::string(ICL_FIXTURES) + "/sklearn_ridge/";
  arma::mat xtr, ytr, xte, pred_fixed, pred_cv, meta;
  ASSERT_TRUE(xtr.load(dir + "x_train.csv", arma::csv_ascii));
  ASSERT_TRUE(ytr.load(dir + "y_train.csv", arma::csv_ascii));
  ASSERT_TRUE(xte.load(dir + "x_test.csv", arma::csv_ascii));
  ASSERT_TRUE(pred_fixed.load(dir + "pred_ridge_fixed.csv", arma::csv_ascii));
  ASSERT_TRUE(pred_cv.load(dir + "pred_ridgecv.csv", arma::csv_ascii));
  ASSERT_TRUE(
      meta.load(dir + "meta.csv", arma::csv_ascii));  // fixed alpha, RidgeCV's alpha, then the grid
  const double fixed_alpha = meta(0, 0), cv_alpha = meta(0, 1);
  const arma::vec grid = meta.row(0).cols(2, meta.n_cols - 1).t();
  // Rows are samples in the files; the probe takes one column per sample. No standardisation:
  // scikit-learn's Ridge does not standardise either.
  const RidgeProbe fixed = Fit(xtr.t(), ytr.t(), arma::vec{fixed_alpha}, /*standardize=*/false);
  const arma::mat ours = fixed.Predict(xte.t()).t();
  EXPECT_LT(arma::abs(ours - pred_fixed).max(), 1e-6 * arma::abs(pred_fixed).max());
  const RidgeProbe cv = Fit(xtr.t(), ytr.t(), grid, /*standardize=*/false);
  EXPECT_DOUBLE_EQ(cv.lambda(), cv_alpha);
  EXPECT_LT(arma::abs(cv.Predict(xte.t()).t() - pred_cv).max(), 1e-6 * arma::abs(pred_cv).max());
}

TEST(Metrics, DefinitionsOnHandMadeNumbers) {
  // y = (1, 2, 3, 6), yhat = (1, 3, 3, 4): sse = 0 + 1 + 0 + 4 = 5; mean 3, sst = 4 + 1 + 0 + 9
  // = 14.
  Errors e;
  e.sse = 5;
  e.sst = 14;
  e.rows = 4;
  e.dims = 1;
  EXPECT_DOUBLE_EQ(e.Mse(), 5.0 / 4);
  EXPECT_DOUBLE_EQ(e.Nmse(), 5.0 / 14);
  EXPECT_DOUBLE_EQ(e.R2(), 1 - 5.0 / 14);
  // The same through a probe's error accumulation.
  arma::mat x = {{0, 1, 2, 3}};
  arma::mat y = {{1, 2, 3, 6}};
  const RidgeProbe p = Fit(x, y, arma::vec{0.0}, false);  // y ~ 0.7 + 1.6 x... whatever it fits
  Errors acc;
  p.AccumulateErrors(x, y, arma::vec{3.0}, acc);
  EXPECT_DOUBLE_EQ(acc.sst, 14);
  // Not a model output: a double-precision fit of four hand-written points (no float32, no
  // BLAS threading); both sides sum the same four squared residuals of size ~1 in this process,
  // so they agree to a few ulps (~1e-15). Another CPU's kernels (FMA or not) move each residual
  // by a few ulps too, not more; 1e-12 leaves three orders of margin.
  EXPECT_NEAR(acc.sse, arma::accu(arma::square(y - p.Predict(x))), 1e-12);
}

TEST(Splits, AreDisjointCoverEveryPromptAndFollowTheFractions) {
  const auto roles = SplitPrompts(1000, {0.8, 0.1, 0.1}, 5);
  const arma::uvec tr = RoleIndices(roles, Role::kTrain), va = RoleIndices(roles, Role::kVal),
                   te = RoleIndices(roles, Role::kTest);
  EXPECT_EQ(tr.n_elem, 800u);
  EXPECT_EQ(va.n_elem, 100u);
  EXPECT_EQ(te.n_elem, 100u);
  std::vector<int> seen(1000, 0);
  for (auto i : tr)
    ++seen[i];
  for (auto i : va)
    ++seen[i];
  for (auto i : te)
    ++seen[i];
  for (int c : seen)
    EXPECT_EQ(c, 1);
  EXPECT_EQ(roles, SplitPrompts(1000, {0.8, 0.1, 0.1}, 5));  // seeded
  EXPECT_NE(roles, SplitPrompts(1000, {0.8, 0.1, 0.1}, 6));
  EXPECT_THROW(SplitPrompts(1000, {1, 0, 0}, 5), std::invalid_argument);
  EXPECT_THROW(SplitPrompts(5, {0.8, 0.1, 0.1}, 5), std::invalid_argument);
}

TEST(GradientProbe, MlpBeatsLinearOnAPlantedNonlinearMap) {
  torch::set_num_threads(1);
  openblas_set_num_threads(1);
  torch::manual_seed(0);
  const long n = 3000, h = 6;
  const auto feats = torch::randn({n, h});
  // target = elementwise square of the first three features
  const auto sq = feats.slice(1, 0, 3).pow(2).to(torch::kFloat64).contiguous();
  const arma::mat y(sq.data_ptr<double>(), 3, n);
  const auto roles = SplitPrompts(n, {0.8, 0.1, 0.1}, 1);
  GradientProbeOptions o;
  o.pooled = false;
  o.max_epochs = 40;
  o.mlp_hidden = 64;
  o.lr = 3e-3;
  o.mlp = false;
  const auto lin =
      FitGradientProbe(feats, y, RoleIndices(roles, Role::kTrain), RoleIndices(roles, Role::kVal),
                       RoleIndices(roles, Role::kTest), o);
  o.mlp = true;
  const auto mlp =
      FitGradientProbe(feats, y, RoleIndices(roles, Role::kTrain), RoleIndices(roles, Role::kVal),
                       RoleIndices(roles, Role::kTest), o);
  EXPECT_LT(lin.test.R2(), 0.1);
  EXPECT_GT(mlp.test.R2(), 0.9);
}

TEST(GradientProbe, PoolingLearnsToAttendToTheInformativePosition) {
  torch::set_num_threads(1);
  torch::manual_seed(1);
  const long n = 2000, t = 5, h = 4;
  const auto feats = torch::randn({n, t, h});
  // The target is a linear function of position 3 only.
  const auto target = (feats.select(1, 3).slice(1, 0, 2) * 2).to(torch::kFloat64).contiguous();
  const arma::mat y(target.data_ptr<double>(), 2, n);
  const auto roles = SplitPrompts(n, {0.8, 0.1, 0.1}, 2);
  GradientProbeOptions o;
  o.mlp = false;
  o.pooled = true;
  o.lr = 1e-2;
  o.max_epochs = 60;
  o.patience = 6;
  const auto fit =
      FitGradientProbe(feats, y, RoleIndices(roles, Role::kTrain), RoleIndices(roles, Role::kVal),
                       RoleIndices(roles, Role::kTest), o);
  EXPECT_EQ(fit.alpha.n_elem, 5u);
  // alpha is a float32 softmax (u = 6e-8) over 5 positions: the float32 row sum and the
  // normalisation give |sum - 1| <= ~(5 + 2) * u = 4e-7 < 1e-6.
  EXPECT_NEAR(arma::accu(fit.alpha), 1.0, 1e-6);
  EXPECT_EQ(fit.alpha.index_max(), 3u);
  EXPECT_GT(fit.test.R2(), 0.95);
}

TEST(RidgeProbe, LambdaZeroWithFewerRowsThanFeaturesIsRefused) {
  const arma::mat x = arma::randn(10, 6);
  FeatureStats fs;
  fs.Init(10);
  fs.Add(x);
  RidgeProbe p(arma::vec{0.0, 1.0});
  EXPECT_THROW(p.Prepare(fs), std::invalid_argument);
}

// Batched fits: probes of several layers trained as one batched model give each
// probe the result of fitting it alone. Every operation acts on each probe's slice separately
// (batched products, per-slice softmax and means, elementwise Adam), so with one intra-op
// thread the arithmetic of slice g does not depend on the batch, and the results are equal.
TEST(GradientProbe, BatchedFitsEqualEachFitAlone) {
  torch::set_num_threads(1);
  openblas_set_num_threads(1);
  torch::manual_seed(3);
  const long n = 1200, t = 4, h = 6;
  std::vector<torch::Tensor> feats;
  for (int g = 0; g < 3; ++g)
    feats.push_back(torch::randn({n, t, h}));
  // The target is read from a different position in each feature set, and better in some.
  const auto target =
      (feats[0].select(1, 3).slice(1, 0, 2) + 0.5 * feats[1].select(1, 1).slice(1, 0, 2))
          .to(torch::kFloat64)
          .contiguous();
  const arma::mat y(target.data_ptr<double>(), 2, n);
  const auto roles = SplitPrompts(n, {0.8, 0.1, 0.1}, 4);
  const auto tr = RoleIndices(roles, Role::kTrain), va = RoleIndices(roles, Role::kVal),
             te = RoleIndices(roles, Role::kTest);
  for (const bool mlp : {false, true}) {
    GradientProbeOptions o;
    o.mlp = mlp;
    o.pooled = true;
    o.mlp_hidden = 16;
    o.max_epochs = 12;
    o.patience = 2;
    o.lr = 3e-3;
    o.seed = 9;
    const auto together = FitGradientProbes(feats, y, tr, va, te, o);
    ASSERT_EQ(together.size(), 3u);
    for (int g = 0; g < 3; ++g) {
      const auto alone = FitGradientProbe(feats[g], y, tr, va, te, o);
      EXPECT_EQ(together[g].epochs, alone.epochs) << "probe " << g << " mlp " << mlp;
      EXPECT_EQ(together[g].test.sse, alone.test.sse) << "probe " << g << " mlp " << mlp;
      EXPECT_TRUE(arma::approx_equal(together[g].alpha, alone.alpha, "absdiff", 0.0));
    }
    // The probes differ: the batch is not one probe copied.
    EXPECT_NE(together[0].test.sse, together[2].test.sse);
  }
}

// The names of the probe families, as the command line's --probes and the Python module's
// probes= list them.
TEST(ProbeFamilies, ParseEachNameAndRefuseOthersNamingTheSetting) {
  for (const Family f : {Family::kRidge, Family::kLinear, Family::kMlp})
    EXPECT_EQ(ParseFamily(FamilyName(f)), f);
  EXPECT_EQ(ParseFamilies({"mlp", "ridge"}), (std::vector<Family>{Family::kMlp, Family::kRidge}));
  using icl::test::InputErrorOf;
  EXPECT_EQ(InputErrorOf([] { ParseFamily("svm"); }),
            "probes: unknown probe 'svm'; expected ridge, linear, mlp");
  EXPECT_EQ(InputErrorOf([] { ParseFamily("Ridge"); }),
            "probes: unknown probe 'Ridge'; expected ridge, linear, mlp");
  EXPECT_EQ(InputErrorOf([] {
              ParseFamilies({"ridge", "forest"});
            }),
            "probes: unknown probe 'forest'; expected ridge, linear, mlp");
  EXPECT_EQ(InputErrorOf([] { ParseFamilies({}); }), "probes: name at least one family");
}

// Arrays in memory are described by their shapes alone (no file behind them), and shapes that
// describe no source are refused naming the setting.
TEST(StatesInfo, ArraysAreDescribedByTheirShapesAndRefusedNamingTheSetting) {
  using icl::extract::Positions;
  const StatesInfo all = DescribeArrays("h", 10, {0, 2}, 6, 4, Positions::kAll, {{"w", 3}});
  EXPECT_EQ(all.name, "h");
  EXPECT_EQ(all.prompts, 10);
  EXPECT_EQ(all.layers, (std::vector<int>{0, 2}));
  EXPECT_EQ(all.hidden, 4);
  EXPECT_EQ(all.model_layers, 2);  // the highest label: states 0..2
  EXPECT_EQ(all.n, 3);             // x_1 y_1 ... x_3 y_3
  EXPECT_EQ(all.d, 3);
  EXPECT_EQ(all.targets, (std::vector<std::string>{"w"}));
  EXPECT_FALSE(all.file.has_value());
  EXPECT_EQ(DescribeArrays("h", 10, {0}, 5, 4, Positions::kY, {{"w", 3}}).n, 5);
  using icl::test::InputErrorOf;
  EXPECT_EQ(InputErrorOf([] {
              DescribeArrays("h", 10, {0}, 5, 4, Positions::kAll, {{"w", 3}});
            }),
            "hidden: positions all: expected 2n tokens (x_1 y_1 ... x_n y_n) per prompt, got 5");
  EXPECT_EQ(InputErrorOf([] {
              DescribeArrays("h", 10, {-1}, 5, 4, Positions::kY, {{"w", 3}});
            }),
            "layers: labels must be in 0..1024, got -1");
  EXPECT_EQ(InputErrorOf([] { DescribeArrays("h", 10, {0}, 5, 4, Positions::kY, {}); }),
            "targets: at least one is needed");
  EXPECT_EQ(InputErrorOf([] {
              DescribeArrays("h", 10, {0}, 5, 4, Positions::kY, {{"w", 0}});
            }),
            "targets: 'w' has no entries");
}

// A run over a K axis labelled other than 1..K speaks in those labels: its records, its request
// and the description's n.
TEST(StatesInfo, RelabelKsPutsTheCallersLabelsEverywhere) {
  ProbeRequest r;
  r.ks = {1, 2};
  ProbeOutput out;
  out.ks = {1, 2};
  out.records.resize(2);
  out.records[0].k = 1, out.records[1].k = 2;
  StatesInfo info = DescribeArrays("h", 10, {0}, 2, 4, icl::extract::Positions::kY, {{"w", 3}});
  RelabelKs({5, 9}, r, out, info);
  EXPECT_EQ(r.ks, (std::vector<int>{5, 9}));
  EXPECT_EQ(out.ks, (std::vector<int>{5, 9}));
  EXPECT_EQ(out.records[1].k, 9);
  EXPECT_EQ(info.n, 9);
}
