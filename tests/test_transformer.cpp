// The transformer learner: shapes, causality, training, checkpoints and exact resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"
#include "data/tokens_torch.hpp"
#include "learners/attention.hpp"
#include "learners/checkpoint.hpp"
#include "learners/convergence.hpp"
#include "learners/gelu.hpp"
#include "learners/train_log.hpp"
#include "learners/trainer.hpp"
#include "tests/test_util.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;
using learners::ModelConfig;
using learners::Transformer;

namespace {

ModelConfig Tiny(int layers = 2) {
  ModelConfig c;
  c.d = 3;
  c.n_max = 5;
  c.layers = layers;
  c.hidden = 16;
  c.heads = 2;
  return c;
}

learners::TrainConfig TinyTrain(std::int64_t steps) {
  learners::TrainConfig t;
  t.task.d = 3;
  t.task.n = 5;
  t.steps = steps;
  t.batch = 8;
  t.lr = 3e-3;
  t.warmup = 2;
  t.eval_every = 5;
  t.eval_prompts = 16;
  t.save_every = 5;
  t.seed = 4;
  return t;
}

torch::Tensor Tokens(int count, int n = 5, std::uint64_t seed = 1) {
  data::TaskConfig t;
  t.d = 3;
  t.n = n;
  return data::TokenTensor(data::SamplePrompts(t, seed, 0, count), 0, count);
}

class SingleThread : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    openblas_set_num_threads(1);
  }
  core::ThreadPool serial{1};  // the calling thread only
};

}  // namespace

TEST(Transformer, ReturnsEveryHiddenStateAndAttention) {
  torch::manual_seed(0);
  Transformer m(Tiny(3));
  const auto tokens = Tokens(4);
  const auto r = m->Run(tokens, {/*hidden_states=*/true, /*attention=*/true});
  ASSERT_EQ(r.hidden.size(), 4u);  // embedding + 3 blocks
  for (const auto& h : r.hidden)
    EXPECT_EQ(h.sizes(), (std::vector<int64_t>{4, 10, 16}));
  ASSERT_EQ(r.attention.size(), 3u);
  for (const auto& a : r.attention) {
    EXPECT_EQ(a.sizes(), (std::vector<int64_t>{4, 2, 10, 10}));
    // float32 (u = 6e-8) softmax rows of <= 10 entries, normalised, then summed again here:
    // |sum - 1| <= ~2 * 10 * u = 1.2e-6, well inside allclose's rtol 1e-5 (single run, no
    // cross-batch comparison).
    EXPECT_TRUE(torch::allclose(a.sum(-1), torch::ones({4, 2, 10})));
    // Exact: masked scores are -inf and exp(-inf) is exactly 0.
    EXPECT_EQ(a.triu(1).abs().max().item<float>(), 0.0f);  // nothing attends to the future
  }
  EXPECT_EQ(r.predictions.sizes(), (std::vector<int64_t>{4, 5}));
  // Exact by construction: Run and forward apply the same ops to the same tensor shapes in the
  // same process, so every element goes through the same kernels in the same order.
  EXPECT_TRUE(torch::equal(r.predictions, m->forward(tokens)));  // the cheap path agrees
  const auto none = m->Run(tokens, {});
  EXPECT_TRUE(none.hidden.empty());
  EXPECT_TRUE(none.attention.empty());
  // Shorter prompts than n_max are fine; wider tokens are not.
  EXPECT_EQ(m->forward(Tokens(2, 3)).sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(test::ThrowsInternalError([&] { m->forward(torch::zeros({1, 12, 4})); }));
}

// The interventions' entry point: continuing from an unedited state gives Run's predictions,
// bit for bit (the same blocks run on the same tensors in the same order).
TEST(Transformer, RunFromAnyStateReproducesTheForwardPass) {
  torch::manual_seed(1);
  Transformer m(Tiny(3));
  const auto tokens = Tokens(4);
  const auto r = m->Run(tokens, {/*hidden_states=*/true, /*attention=*/false});
  for (int l = 0; l <= 3; ++l)
    EXPECT_TRUE(torch::equal(m->RunFrom(l, r.hidden[l]), r.predictions)) << "state " << l;
  // An edit after the last block at a y-token changes nothing (predictions are read at the
  // x-tokens); at an x-token it changes that prediction only.
  auto edited = r.hidden[3].clone();
  edited.select(1, 3).add_(1.0);
  EXPECT_TRUE(torch::equal(m->RunFrom(3, edited), r.predictions));
  edited.select(1, 4).add_(1.0);
  const auto moved = m->RunFrom(3, edited);
  EXPECT_FALSE(torch::equal(moved.select(1, 2), r.predictions.select(1, 2)));
  EXPECT_TRUE(torch::equal(moved.select(1, 1), r.predictions.select(1, 1)));
  EXPECT_TRUE(test::ThrowsInternalError([&] { m->RunFrom(4, r.hidden[3]); }));
  EXPECT_TRUE(test::ThrowsInternalError([&] { m->RunFrom(0, torch::zeros({1, 10, 8})); }));
}

TEST(Transformer, IsCausal) {
  torch::manual_seed(1);
  Transformer m(Tiny(2));
  const auto tokens = Tokens(2);
  const auto base = m->Run(tokens, {true, false});
  for (int t = 0; t < 10; ++t) {
    auto changed = tokens.clone();
    changed.select(1, t).add_(3.0);
    const auto r = m->Run(changed, {true, false});
    for (std::size_t l = 0; l < r.hidden.size(); ++l) {
      // Exact by construction: same shapes, so the same kernels and blocking; rows before t see
      // identical inputs, and the changed later positions enter only through exact zeros
      // (attention weight exp(-inf) = 0, and acc + 0 * v == acc for finite v).
      EXPECT_TRUE(torch::equal(r.hidden[l].slice(1, 0, t), base.hidden[l].slice(1, 0, t)))
          << "t=" << t;
      EXPECT_FALSE(torch::equal(r.hidden[l].select(1, t), base.hidden[l].select(1, t)));
    }
  }
}

TEST(Transformer, OneLayerModelOverfitsAFixedBatch) {
  torch::manual_seed(2);
  Transformer m(Tiny(1));
  const auto tokens = Tokens(4);
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  const auto set = data::SamplePrompts(t, 1, 0, 4);
  const auto y = torch::from_blob(const_cast<double*>(set.y.memptr()), {4, 5}, torch::kFloat64)
                     .to(torch::kFloat32);
  torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int step = 0; step < 400; ++step) {
    opt.zero_grad();
    auto loss = torch::mse_loss(m->forward(tokens), y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.01 * first) << first << " -> " << last;
}

TEST(Checkpoint, SaveLoadGivesIdenticalOutputs) {
  test::TempDir tmp;
  torch::manual_seed(3);
  Transformer m(Tiny(2));
  learners::SaveCheckpoint(tmp / "c.h5", m, TinyTrain(0), 7, nullptr);
  learners::CheckpointInfo info;
  Transformer loaded = learners::LoadCheckpoint(tmp / "c.h5", &info);
  EXPECT_EQ(info.step, 7);
  EXPECT_TRUE(info.model == m->config);
  EXPECT_FALSE(info.has_train_state);
  const auto tokens = Tokens(3);
  // Exact by construction: float32 parameters round-trip bit for bit through HDF5, and both
  // forward passes run the same shapes in the same process.
  EXPECT_TRUE(torch::equal(m->forward(tokens), loaded->forward(tokens)));
  EXPECT_FALSE(std::filesystem::exists(tmp / "c.h5.partial"));
}

TEST(Checkpoint, IsReadableWithTheHdf5Tools) {
  test::TempDir tmp;
  torch::manual_seed(3);
  Transformer m(Tiny(2));
  learners::SaveCheckpoint(tmp / "c.h5", m, TinyTrain(0), 0, nullptr);
  const auto ls = test::RunShell("h5ls -r '" + (tmp / "c.h5") + "'");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/params/blocks.1.attn.in_proj_weight", "48, 16"))
      << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/params/pos_embed", "10, 16")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/params/readout.weight", "1, 16")) << ls.out;
  EXPECT_TRUE(test::H5lsHasDataset(ls.out, "/params/final_ln.weight", "16")) << ls.out;
  const auto dump = test::RunShell("h5dump -a /format -a /model_config '" + (tmp / "c.h5") + "'");
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("\"iclprobe-checkpoint\""), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("\"layers\":2"), std::string::npos) << dump.out;
}

TEST(Checkpoint, RefusesWrongFormatMissingOrMisshapenParameters) {
  test::TempDir tmp;
  torch::manual_seed(3);
  Transformer m(Tiny(2));
  const std::string good = tmp / "good.h5";
  learners::SaveCheckpoint(good, m, TinyTrain(0), 0, nullptr);
  auto error_of = [](const std::string& path) {
    try {
      learners::LoadCheckpoint(path);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto edit = [&](const std::string& name, const std::function<void(h5::File&)>& f) {
    const std::string path = tmp / name;
    std::filesystem::copy_file(good, path);
    h5::File file = h5::File::Open(path, h5::File::Mode::kReadWrite);
    f(file);
    return path;
  };
  const auto wrong_format =
      edit("fmt.h5", [](h5::File& f) { f.SetAttr("format", "iclprobe-activations"); });
  EXPECT_NE(error_of(wrong_format).find("expected 'iclprobe-checkpoint'"), std::string::npos);

  const auto missing = edit("missing.h5", [](h5::File& f) {
    H5Ldelete(f.id(), "/params/blocks.1.fc2.bias", H5P_DEFAULT);
  });
  EXPECT_NE(error_of(missing).find("missing parameter 'blocks.1.fc2.bias'"), std::string::npos)
      << error_of(missing);

  const auto shape = edit("shape.h5", [](h5::File& f) {
    H5Ldelete(f.id(), "/params/readout.weight", H5P_DEFAULT);
    f.CreateDataset<float>("params/readout.weight", {2, 16});
  });
  EXPECT_NE(error_of(shape).find(
                "parameter 'readout.weight' has shape [2, 16], the model expects [1, 16]"),
            std::string::npos)
      << error_of(shape);

  const auto version = edit("version.h5", [](h5::File& f) { f.SetAttr("format_version", 99); });
  EXPECT_NE(error_of(version).find("format_version 99"), std::string::npos);
}

TEST_F(SingleThread, ResumedRunEqualsUninterruptedRun) {
  test::TempDir tmp;
  const auto train = TinyTrain(12);
  learners::Train({Tiny(2), train, tmp / "full.h5", false, -1}, serial);
  auto r1 =
      learners::Train({Tiny(2), train, tmp / "split.h5", false, /*stop_after_steps=*/7}, serial);
  EXPECT_EQ(r1.step, 7);
  EXPECT_FALSE(r1.finished);
  auto r2 = learners::Train({Tiny(2), train, tmp / "split.h5", /*resume=*/true, -1}, serial);
  EXPECT_EQ(r2.step, 12);
  EXPECT_TRUE(r2.finished);
  Transformer a = learners::LoadCheckpoint(tmp / "full.h5"),
              b = learners::LoadCheckpoint(tmp / "split.h5");
  auto pa = a->named_parameters(), pb = b->named_parameters();
  // Exact by construction: both runs take the same steps with the same batch shapes on one
  // thread in the same process, and the checkpoint restores parameters and optimizer state bit
  // for bit. (Not a comparison across batch sizes, thread counts or machines.)
  for (const auto& p : pa)
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  // And it did learn something: the parameters moved away from the initialisation.
  torch::manual_seed(train.seed);
  Transformer init(Tiny(2));
  EXPECT_FALSE(torch::equal(init->named_parameters()["readout.weight"], pa["readout.weight"]));
}

TEST_F(SingleThread, DivergenceStopsAndKeepsTheLastGoodCheckpoint) {
  test::TempDir tmp;
  auto train = TinyTrain(30);
  train.save_every = 1;
  train.lr = 1e30;
  train.warmup = 0;
  train.clip = 0;
  try {
    learners::Train({Tiny(2), train, tmp / "nan.h5", false, -1}, serial);
    FAIL() << "expected divergence";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("loss became"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last good checkpoint"), std::string::npos) << e.what();
  }
  // The kept checkpoint loads; its step is before the divergence.
  learners::CheckpointInfo info;
  EXPECT_NO_THROW(learners::LoadCheckpoint(tmp / "nan.h5", &info));
  EXPECT_LT(info.step, 30);
}

TEST(Trainer, ErrorsMatchAHandComputation) {
  torch::manual_seed(5);
  Transformer m(Tiny(1));
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  const auto set = data::SamplePrompts(t, 2, 0, 7);
  const arma::mat err = learners::TransformerErrors(m, set, /*batch=*/3);
  const auto pred = m->forward(data::TokenTensor(set, 0, 7));
  for (int i = 0; i < 7; ++i)
    for (int k = 0; k < 5; ++k) {
      // err holds (p1 - y)^2 / d with p1 the float32 prediction from batches of 3; p2 here comes
      // from one batch of 7. Other batch shapes may take other BLAS kernels / blocking, so p1 and
      // p2 may differ in the last bits (5e-9..4e-8 seen on an AVX-512 Xeon).
      // float32: unit roundoff u = 6e-8; predictions are O(1) after one block of dot products
      // of length K <= 4H = 64 (plus LayerNorm and the readout): typical drift sqrt(K) * u =
      // 5e-7, worst case K * u = 4e-6 per product, so |p1 - p2| <= dp = 1e-5 * max(1, |p|).
      // Then |(p1 - y)^2 - (p2 - y)^2| = |p1 - p2| |p1 + p2 - 2y| <= dp (2 |p2 - y| + dp), / d.
      const double p = pred[i][k].item<double>(), y = set.y(k, i);
      const double dp = 1e-5 * std::max(1.0, std::abs(p));
      EXPECT_NEAR(err(k, i), std::pow(p - y, 2) / 3, dp * (2 * std::abs(p - y) + dp) / 3)
          << "prompt " << i << " k=" << k;
    }
}

TEST(Transformer, BatchedQueriesEqualOneAtATimeForwardPasses) {
  torch::manual_seed(6);
  Transformer m(Tiny(2));
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  const auto set = data::SamplePrompts(t, 8, 0, 2);
  arma::arma_rng::set_seed(3);
  arma::cube q(3, 4, 5, arma::fill::randn);
  const arma::mat all = learners::QueryPredictionsAllK(m, set, 1, q);  // 4 x 5
  // Both prompts in one batch: prompt 1's block equals its own call (the same tolerance).
  const arma::mat both = learners::QueryPredictionsAllK(m, set, 0, 2, arma::join_slices(q, q));
  ASSERT_EQ(both.n_cols, 10u);
  EXPECT_LT(arma::abs(both.cols(5, 9) - all).max(), 1e-5 * std::max(1.0, arma::abs(all).max()));
  for (int k = 0; k < 5; ++k) {
    const arma::vec per_k = learners::QueryPredictions(m, set, 1, k, q.slice(k));
    for (int j = 0; j < 4; ++j) {
      // One query, one sequence: the context's 2k tokens, then [0, x'].
      auto tokens = torch::zeros({1, 2L * k + 1, 4});
      if (k > 0) tokens.slice(1, 0, 2 * k).copy_(data::TokenTensor(set, 1, 1, k));
      for (int c = 0; c < 3; ++c)
        tokens[0][2 * k][1 + c] = q(c, j, k);
      const double single = m->forward(tokens)[0][k].item<double>();
      // Three float32 forward passes of different batch sizes (20, 4, 1) and sequence lengths
      // (2n vs 2k+1), so different GEMM kernels / blocking and softmax row lengths: results agree
      // only up to rounding. float32: unit roundoff u = 6e-8; predictions are O(1) after two
      // blocks of dot products of length K <= 4H = 64 (plus LayerNorm and the readout): the
      // typical drift is ~sqrt(K) * u = 5e-7 per product, the worst case K * u = 4e-6, so
      // |diff| <= 1e-5 * max(1, |prediction|).
      const double tol = 1e-5 * std::max(1.0, std::abs(single));
      EXPECT_NEAR(all(j, k), single, tol) << "k=" << k;
      EXPECT_NEAR(per_k(j), single, tol) << "k=" << k;
    }
  }
}

// The flat optimizer is LibTorch's AdamW applied to one buffer holding every parameter. Each
// element's update is the same arithmetic as on its own tensor, so without clipping the two agree
// bit for bit. Clipping scales every gradient by clip / ||g||, and the flat buffer sums the squares
// in another order than per-tensor norms combined: the factor differs by a few float32 roundings
// (relative ~1e-7), i.e. each step's update by that fraction; over 6 steps of an update of size
// <= lr = 3e-3 per element (Adam's normalised step) that is < 1e-8 absolute, so 1e-6 holds with a
// wide margin. One exception: the key bias (rows H..2H of in_proj_bias) adds the same constant
// to all of a query's scores, which softmax ignores, so its true gradient is zero and its computed
// gradient is rounding noise; Adam normalises that noise to steps of up to ~lr each, whose signs
// follow the rounding. Those elements are only bounded by 6 steps of 2 lr.
TEST_F(SingleThread, FlatAdamWEqualsLibTorchAdamWOnEachTensor) {
  for (const double clip : {0.0, 0.5}) {
    torch::manual_seed(3);
    Transformer a(Tiny(2));
    torch::manual_seed(3);
    Transformer b(Tiny(2));
    torch::optim::AdamW ref(a->parameters(),
                            torch::optim::AdamWOptions(3e-3).betas({0.9, 0.98}).weight_decay(0.01));
    learners::FlatAdamW flat(*b, {3e-3, 0.9, 0.98, 1e-8, 0.01});
    for (int step = 0; step < 6; ++step) {
      const auto tokens = Tokens(8, 5, 10 + step);
      const auto target = torch::ones({8, 5});
      ref.zero_grad();
      torch::mse_loss(a->forward(tokens), target).backward();
      if (clip > 0) torch::nn::utils::clip_grad_norm_(a->parameters(), clip);
      ref.step();
      flat.ZeroGrad();
      torch::mse_loss(b->forward(tokens), target).backward();
      if (clip > 0) flat.ClipGradNorm(clip);
      flat.Step(3e-3);
    }
    auto pa = a->named_parameters(), pb = b->named_parameters();
    const std::int64_t H = Tiny(2).hidden;
    for (const auto& p : pa) {
      const torch::Tensor diff = (p.value() - pb[p.key()]).abs();
      if (clip == 0) {
        EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
      } else if (p.key().find("in_proj_bias") != std::string::npos) {
        EXPECT_LT(diff.slice(0, 0, H).max().item<double>(), 1e-6) << p.key() << " (queries)";
        EXPECT_LT(diff.slice(0, 2 * H).max().item<double>(), 1e-6) << p.key() << " (values)";
        EXPECT_LT(diff.slice(0, H, 2 * H).max().item<double>(), 6 * 2 * 3e-3) << p.key();
      } else {
        EXPECT_LT(diff.max().item<double>(), 1e-6) << p.key();
      }
    }
    // The parameters moved, and the moments come back per parameter with the same values.
    torch::manual_seed(3);
    EXPECT_FALSE(torch::equal(Transformer(Tiny(2))->named_parameters()["readout.weight"],
                              pb["readout.weight"]));
    const learners::AdamMoments m = flat.Moments();
    EXPECT_EQ(m.step, 6);
    EXPECT_EQ(m.exp_avg.size(), pb.size());
  }
}

// Shards are the unit of arithmetic, threads only run them: each shard is its own forward and
// backward pass on one intra-op thread, and the gradients are summed in shard order, so a run on
// 1 worker and on 3 workers gives the same checkpoint bit for bit. One shard is the whole batch.
TEST_F(SingleThread, ShardedTrainingDoesNotDependOnTheWorkerCount) {
  test::TempDir tmp;
  auto train = TinyTrain(6);
  train.shards = 3;
  learners::TrainRequest one{Tiny(2), train, tmp / "w1.h5", false, -1};
  learners::TrainRequest three = one;
  three.out = tmp / "w3.h5";
  core::ThreadPool pool1(1), pool3(3);
  learners::Train(one, pool1);
  learners::Train(three, pool3);
  auto pa = learners::LoadCheckpoint(tmp / "w1.h5")->named_parameters();
  auto pb = learners::LoadCheckpoint(tmp / "w3.h5")->named_parameters();
  for (const auto& p : pa)
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  // Files from before shards existed computed the batch whole.
  nlohmann::json j = nlohmann::json::parse(TinyTrain(6).ToJson());
  EXPECT_EQ(j["shards"], 2);
  j.erase("shards");
  EXPECT_EQ(learners::TrainConfig::FromJson(j.dump(), "test").shards, 1);
}

// FusedExp against the double-precision exp: Cephes' expf polynomial with this range reduction
// has a peak relative error of 1.7e-7 (its documentation, IEEE float32); the product by the
// power of two is exact (a normal result). Bound: 2.5e-7, for margin over the 1.7e-7.
TEST(FusedGelu, ExpIsWithinItsPolynomialErrorOfExp) {
  double worst = 0;
  for (int i = -8700; i <= 8700; ++i)
    for (const float off : {0.0f, 0.0037f, 0.0071f}) {
      const float z = i * 0.01f + off;
      if (z > 87.0f) continue;
      const double want = std::exp(double(z));
      worst = std::max(worst, std::abs(double(learners::FusedExp(z)) - want) / want);
    }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(learners::FusedExp(std::nanf("")), 1.0f);                   // defined: NaN is read as 0
  EXPECT_EQ(learners::FusedExp(-1000.0f), learners::FusedExp(-87.0f));  // clamped, not 0 * inf
}

// The fused GELU is the tanh-GELU to float32 rounding, forward and backward. The error of
// s = sigmoid(2u): e^(-2u) to 2.5e-7 relative (above) moves s by at most 2.5e-7 relative; u's
// four float operations by 4 ulp (4.8e-7) relative, which moves s by 2 s (1 - s) |u| 4.8e-7
// <= 2.7e-7; the division and product add 1.2e-7. So |y - gelu(x)| <= 6.4e-7 |x| (bound
// 1e-6 |x|). The derivative s + x s (1 - s) u': s carries its 6.4e-7 relative error; 1 - s, near
// s = 1, an absolute 6e-8 more; |x s (1 - s) u'| <= 1.2 (1 + |x|): bound 3e-6 (1 + |x|).
TEST(FusedGelu, MatchesTheTanhGeluAndItsDerivative) {
  torch::manual_seed(3);
  const auto x = torch::cat({torch::linspace(-12, 12, 2401), torch::randn({4000}) * 3,
                             torch::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 50.0f, -50.0f})})
                     .requires_grad_(true);
  const auto y = learners::FusedGelu(x);
  const auto xd = x.detach().to(torch::kFloat64);
  const auto c = std::sqrt(2.0 / std::acos(-1.0));
  const auto u = c * (xd + 0.044715 * xd.pow(3));
  const auto want = 0.5 * xd * (1 + torch::tanh(u));
  const auto scale = xd.abs();
  EXPECT_TRUE(((y.detach().to(torch::kFloat64) - want).abs() <= 1e-6 * scale).all().item<bool>());
  const auto w = torch::randn({x.size(0)});
  (y * w).sum().backward();
  const auto t = torch::tanh(u);
  const auto dwant = (0.5 * (1 + t) + 0.5 * xd * (1 - t * t) * c * (1 + 3 * 0.044715 * xd * xd)) *
                     w.to(torch::kFloat64);
  const auto err = (x.grad().to(torch::kFloat64) - dwant).abs();
  EXPECT_TRUE((err <= 3e-6 * (1 + scale) * w.to(torch::kFloat64).abs()).all().item<bool>())
      << err.max().item<double>();
  // Far out: 0 for very negative x (not |x|^3 times a tiny s), NaN for NaN, as LibTorch.
  const auto far =
      torch::tensor({-1e13f, -1e20f, -1e30f, 1e20f, std::nanf("")}).requires_grad_(true);
  const auto yf = learners::FusedGelu(far);
  yf.sum().backward();
  const auto gf = far.grad();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(yf[i].item<float>(), 0.0f) << i;
    EXPECT_EQ(gf[i].item<float>(), 0.0f) << i;
  }
  EXPECT_EQ(yf[3].item<float>(), 1e20f);
  EXPECT_EQ(gf[3].item<float>(), 1.0f);
  EXPECT_TRUE(std::isnan(yf[4].item<float>()) && std::isnan(gf[4].item<float>()));
  // Without a gradient to keep (extraction), the same values.
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(learners::FusedGelu(x.detach()), y.detach()));
}

namespace {

// The causal attention in float64 from the same (float32) q, k, v, as LibTorch's operators do it:
// q, k, v, g [B, M, T, dh] -> out [B, M, T, dh] and the gradients of sum(out * g).
struct AttentionReference {
  torch::Tensor p, out, dq, dk, dv;
};
AttentionReference ReferenceAttention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& g) {
  const auto T = q.size(2);
  const double scale = 1.0 / std::sqrt(double(q.size(3)));
  auto qd = q.to(torch::kFloat64).requires_grad_(true),
       kd = k.to(torch::kFloat64).requires_grad_(true),
       vd = v.to(torch::kFloat64).requires_grad_(true);
  const auto s = (torch::matmul(qd, kd.transpose(-2, -1)) * scale)
                     .masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
  const auto p = torch::softmax(s, -1);
  const auto out = torch::matmul(p, vd);
  (out * g.to(torch::kFloat64)).sum().backward();
  return {p.detach(), out.detach(), qd.grad(), kd.grad(), vd.grad()};
}

// [B, T, 3H] <-> per head [B, M, T, dh].
torch::Tensor HeadPart(const torch::Tensor& qkv, int part, int heads) {
  const auto B = qkv.size(0), T = qkv.size(1), H = qkv.size(2) / 3;
  return qkv.view({B, T, 3, heads, H / heads}).select(2, part).permute({0, 2, 1, 3});
}
torch::Tensor Heads(const torch::Tensor& x, int heads) {  // [B, T, H] -> [B, M, T, dh]
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

// Running-error bounds of the fused attention against exact arithmetic (u = 2^-24, float32's
// unit roundoff; g(n) = n u / (1 - n u)), each the standard bound of a sum of n products in
// any order, |fl(sum) - sum| <= g(n) sum |terms|, applied stage by stage:
//   scores  |ds_tu| <= g(dh + 2) scale sum_j |q_tj k_uj|
//   P row t relative error rho_t <= 2 max_u |ds_tu| + (T + 12) u  (the shift by the max, FusedExp's
//           4.2 u, the sum and the division), or absolute 1.7e-38 where e^(s - max) < e^-87
//   out     <= sum_u P_tu |v_uj| (rho_t + g(T + 1))
//   dP      |ddp_tu| <= g(dh + 1) sum_j |g_tj v_uj|;  r_t = sum_u P_tu dP_tu to
//           sum_u P_tu (rho_t |dP_tu| + ddp_tu) + g(T + 1) sum_u P_tu |dP_tu|
//   dS      <= scale P_tu ((rho_t + 3u) |dP_tu - r_t| + ddp_tu + dr_t)
//   dq = dS k, dk = dS^T q: |d dS| |k| + g(T + 1) |dS| |k|;  dv = P^T g: (rho P)^T |g| + g(T + 1)
//   P^T |g|.
struct AttentionBounds {
  torch::Tensor p, out, dq, dk, dv;
};
AttentionBounds BoundAttention(const torch::Tensor& qf, const torch::Tensor& kf,
                               const torch::Tensor& vf, const torch::Tensor& gf,
                               const AttentionReference& ref) {
  const double u = std::ldexp(1.0, -24);
  const auto gam = [&](double n) { return n * u / (1 - n * u); };
  const auto T = qf.size(2), dh = qf.size(3);
  const double scale = 1.0 / std::sqrt(double(dh));
  const auto q = qf.to(torch::kFloat64).abs(), k = kf.to(torch::kFloat64).abs(),
             v = vf.to(torch::kFloat64), g = gf.to(torch::kFloat64);
  const auto lower = torch::ones({T, T}, torch::kBool).tril().to(torch::kFloat64);
  const auto ds = gam(dh + 2) * scale * torch::matmul(q, k.transpose(-2, -1)) * lower;
  const auto rho = 2 * std::get<0>(ds.max(-1, true)) + (T + 12) * u;  // [B, M, T, 1]
  const auto& P = ref.p;
  AttentionBounds b;
  // Below e^-87 (float's normal range) the kernel's P is 0.
  b.p = rho * P + 1.7e-38;
  b.out = torch::matmul(P, v.abs()) * (rho + gam(T + 1));
  const auto dP = torch::matmul(g, v.transpose(-2, -1));
  const auto ddp = gam(dh + 1) * torch::matmul(g.abs(), v.abs().transpose(-2, -1)) * lower;
  const auto r = (P * dP).sum(-1, true);
  const auto dr =
      (P * (rho * dP.abs() + ddp)).sum(-1, true) + gam(T + 1) * (P * dP.abs()).sum(-1, true);
  const auto dS = P * (dP - r) * scale;
  const auto d_dS = scale * P * ((rho + 3 * u) * (dP - r).abs() + ddp + dr);
  b.dq = torch::matmul(d_dS, k) + gam(T + 1) * torch::matmul(dS.abs(), k);
  b.dk = torch::matmul(d_dS.transpose(-2, -1), q) +
         gam(T + 1) * torch::matmul(dS.abs().transpose(-2, -1), q);
  b.dv = torch::matmul((rho * P).transpose(-2, -1), g.abs()) +
         gam(T + 1) * torch::matmul(P.transpose(-2, -1), g.abs());
  return b;
}

// How far a float32 result is from the exact one, as a multiple of its bound (<= 1: within).
double Worst(const torch::Tensor& got, const torch::Tensor& exact, const torch::Tensor& bound) {
  // The float64 reference's own error (~1e-16 relative) is far below every bound but zero's.
  return ((got.to(torch::kFloat64) - exact).abs() / (bound + 1e-300)).max().item<double>();
}

}  // namespace

// The fused attention is causal softmax attention: forward, weights and gradients within the
// running-error bounds above of the exact (float64) values, for head widths 16, 8 and 32 (each
// its own compiled instance) and 1 (the generic one), and positions far apart in scale (scores
// up to ~50, where one key takes nearly all weight).
// LibTorch's float32 operators meet the same bounds (they are not a tautology of the kernel).
TEST(FusedAttention, MatchesExactAttentionWithinRunningErrorBounds) {
  for (const auto& [heads, hidden, T, spread] :
       {std::tuple{4, 64, 24, 1.0}, std::tuple{2, 2, 9, 1.0}, std::tuple{2, 32, 80, 4.0},
        std::tuple{4, 32, 13, 1.0}, std::tuple{4, 128, 20, 1.0}}) {
    SCOPED_TRACE("heads " + std::to_string(heads) + " hidden " + std::to_string(hidden));
    torch::manual_seed(11);
    const auto qkv = (torch::randn({3, T, 3L * hidden}) * spread).requires_grad_(true);
    const auto g = torch::randn({3, T, long(hidden)});
    torch::Tensor weights;
    const auto out = learners::FusedCausalAttention(qkv, heads, &weights);
    (out * g).sum().backward();
    const auto q = HeadPart(qkv.detach(), 0, heads), k = HeadPart(qkv.detach(), 1, heads),
               v = HeadPart(qkv.detach(), 2, heads), gh = Heads(g, heads);
    const auto ref = ReferenceAttention(q, k, v, gh);
    const auto bound = BoundAttention(q, k, v, gh, ref);
    const auto grad = qkv.grad();
    EXPECT_LE(Worst(Heads(out.detach(), heads), ref.out, bound.out), 1.0);
    EXPECT_LE(Worst(HeadPart(grad, 0, heads), ref.dq, bound.dq), 1.0);
    EXPECT_LE(Worst(HeadPart(grad, 1, heads), ref.dk, bound.dk), 1.0);
    EXPECT_LE(Worst(HeadPart(grad, 2, heads), ref.dv, bound.dv), 1.0);
    // P: exactly 0 above the diagonal, rows within their relative error of the exact P.
    EXPECT_TRUE(torch::equal(weights.triu(1), torch::zeros_like(weights)));
    EXPECT_LE(Worst(weights, ref.p, bound.p), 1.0);
    // LibTorch's float32 path (kernels 2's attention) within the same bounds.
    auto q32 = q.clone().requires_grad_(true), k32 = k.clone().requires_grad_(true),
         v32 = v.clone().requires_grad_(true);
    const auto s =
        (torch::matmul(q32, k32.transpose(-2, -1)) * (1.0 / std::sqrt(double(hidden / heads))))
            .masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
    const auto o32 = torch::matmul(torch::softmax(s, -1), v32);
    (o32 * gh).sum().backward();
    EXPECT_LE(Worst(o32.detach(), ref.out, bound.out), 1.0);
    EXPECT_LE(Worst(q32.grad(), ref.dq, bound.dq), 1.0);
    EXPECT_LE(Worst(k32.grad(), ref.dk, bound.dk), 1.0);
    EXPECT_LE(Worst(v32.grad(), ref.dv, bound.dv), 1.0);
  }
}

// Its bits depend neither on the number of threads nor on which prompts share a batch; a later
// position never reaches an earlier one; a NaN score makes its row NaN (a diverging run is seen);
// inference gives the bits of the training pass.
TEST(FusedAttention, IsExactAcrossThreadsAndBatchesAndCausal) {
  torch::manual_seed(12);
  const auto qkv = torch::randn({5, 24, 3 * 64});
  const auto g = torch::randn({5, 24, 64});
  const int threads = at::get_num_threads();
  const auto run = [&](const torch::Tensor& x) {
    auto xr = x.clone().requires_grad_(true);
    const auto out = learners::FusedCausalAttention(xr, 4);
    (out * g.slice(0, 0, x.size(0))).sum().backward();
    return std::pair{out.detach(), xr.grad()};
  };
  at::set_num_threads(1);
  const auto [out1, grad1] = run(qkv);
  at::set_num_threads(2);
  const auto [out2, grad2] = run(qkv);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(out1, out2));
  EXPECT_TRUE(torch::equal(grad1, grad2));
  const auto [out_first, grad_first] = run(qkv.slice(0, 0, 2));  // prompts 0 and 1 alone
  EXPECT_TRUE(torch::equal(out_first, out1.slice(0, 0, 2)));
  EXPECT_TRUE(torch::equal(grad_first, grad1.slice(0, 0, 2)));
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(learners::FusedCausalAttention(qkv, 4), out1));
  }
  auto later = qkv.clone();
  later.slice(1, 10).normal_();
  EXPECT_TRUE(
      torch::equal(learners::FusedCausalAttention(later, 4).slice(1, 0, 10), out1.slice(1, 0, 10)));
  auto bad = qkv.clone();
  bad[1][7][3] = std::nanf("");  // a query of head 0 at position 7 of prompt 1
  const auto out_bad = learners::FusedCausalAttention(bad, 4);
  EXPECT_TRUE(out_bad[1][7].slice(0, 0, 16).isnan().all().item<bool>());
  EXPECT_TRUE(torch::equal(out_bad[0], out1[0]));
  EXPECT_FALSE(out_bad[1][6].isnan().any().item<bool>());
}

// Files written before `kernels` existed computed with LibTorch's operators: absent means 1,
// and 1 is not written, so their configuration text (which resume compares) stays the same.
TEST(ModelConfig, KernelsAbsentMeansLibTorchAndOnlyOneIsNotWritten) {
  ModelConfig c = Tiny();
  EXPECT_EQ(c.kernels, 3);  // new learners
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "test").kernels, 3);
  c.kernels = 2;
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "test").kernels, 2);
  c.kernels = 1;
  EXPECT_EQ(c.ToJson().find("kernels"), std::string::npos);
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "test").kernels, 1);
  c.kernels = 4;
  EXPECT_THROW(c.Validate(), core::InputError);
  // The two arithmetics are one function: their predictions agree to float32 rounding. The
  // GELUs differ by at most 1e-6 |x| (above); two blocks and the readout at this initialisation
  // amplify a perturbation of the residual stream by less than 10: bound 1e-5.
  torch::manual_seed(5);
  c.kernels = 1;
  Transformer a(c);
  c.kernels = 2;
  torch::manual_seed(5);
  Transformer b(c);
  const auto tokens = torch::randn({4, 2L * c.n_max, c.d + 1L});
  torch::NoGradGuard no_grad;
  const auto pa = a->forward(tokens), pb = b->forward(tokens);
  EXPECT_FALSE(torch::equal(pa, pb));  // another arithmetic indeed
  EXPECT_LT((pa - pb).abs().max().item<double>(), 1e-5);
  // Kernels 3 adds the fused attention: its running error (FusedAttention's bounds) is at most
  // (2 (dh + 2) + 2 T + 26) u ~ 60 u = 3.6e-6 of max |v| per block, |v| < 3 at this
  // initialisation, and blocks and readout amplify by less than 10: bound 1e-4.
  c.kernels = 3;
  torch::manual_seed(5);
  Transformer f(c);
  const auto pf = f->forward(tokens);
  EXPECT_FALSE(torch::equal(pf, pb));
  EXPECT_LT((pf - pb).abs().max().item<double>(), 1e-4);
}

namespace {

// A training run with its evaluation log, as `iclprobe train` writes them.
learners::CheckpointInfo TrainWithLog(const learners::TrainConfig& train, const std::string& out,
                                      core::ThreadPool& pool, std::int64_t stop_after = -1) {
  const std::string log = learners::TrainLogPath(out);
  learners::StartTrainLog(log, train.task.noise > 0);
  learners::TrainCallbacks cb;
  cb.on_eval = [&](const learners::EvalRecord& r) { learners::AppendTrainLog(log, r); };
  learners::Train({Tiny(2), train, out, false, stop_after}, pool, cb);
  return learners::ReadCheckpointInfo(out);
}

// A 20-step run and its half-budget run (10 steps, half the warmup), with their logs.
struct RunAndHalf {
  learners::TrainConfig full_config;
  learners::CheckpointInfo full, half;
};
RunAndHalf TrainRunAndHalf(const test::TempDir& tmp, core::ThreadPool& pool) {
  auto full = TinyTrain(20), half = TinyTrain(10);
  full.warmup = 2, half.warmup = 1;
  return {full, TrainWithLog(full, tmp / "full.h5", pool),
          TrainWithLog(half, tmp / "half.h5", pool)};
}

std::string MessageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_F(SingleThread, TrainLogRoundTripsAndRefusesMalformedLogs) {
  test::TempDir tmp;
  const auto train = TinyTrain(10);
  TrainWithLog(train, tmp / "run.h5", serial);
  const learners::TrainLog log = learners::ReadTrainLog(tmp / "run.train.csv");
  EXPECT_EQ(log.ref_name, "ols");
  ASSERT_EQ(log.evals.size(), 2u);  // steps 5 and 10
  EXPECT_EQ(log.evals[0].step, 5);
  EXPECT_EQ(log.evals[1].step, 10);
  ASSERT_EQ(log.evals[1].model_error.n_elem, 5u);
  // The log's errors are the checkpoint's on the evaluation prompts, printed to 9 significant
  // digits: relative rounding at most 5e-9.
  Transformer m = learners::LoadCheckpoint(tmp / "run.h5");
  const arma::vec rerun =
      arma::mean(learners::TransformerErrors(
                     m, data::SamplePrompts(train.task, train.eval_seed, 0, train.eval_prompts)),
                 1);
  for (arma::uword k = 0; k < rerun.n_elem; ++k)
    EXPECT_NEAR(log.evals[1].model_error(k), rerun(k), 5e-9 * rerun(k)) << k;

  const std::string text = test::ReadFile(tmp / "run.train.csv");
  const std::string head = text.substr(0, text.find('\n') + 1);
  const std::string body = text.substr(head.size());
  const auto refused = [&](const std::string& name, const std::string& content) {
    const std::string path = tmp / name;
    std::ofstream(path) << content;
    return MessageOf([&] { learners::ReadTrainLog(path); });
  };
  EXPECT_NE(refused("h.csv", "step,lr\n" + body).find("expected the header"), std::string::npos);
  EXPECT_NE(refused("e.csv", "").find("is empty"), std::string::npos);
  std::string bad = body;
  bad.replace(bad.find(",0,"), 3, ",0x,");
  EXPECT_NE(refused("x.csv", head + bad).find("line 2: expected step,lr"), std::string::npos)
      << refused("x.csv", head + bad);
  EXPECT_NE(refused("nan.csv", head + "5,0.1,nan,1,0,1,1\n").find("line 2"), std::string::npos);
  EXPECT_NE(refused("skip.csv", head + "5,0.1,1,1,0,1,1\n5,0.1,1,1,2,1,1\n").find("expected k = 1"),
            std::string::npos);
  EXPECT_NE(refused("back.csv", head + "5,0.1,1,1,0,1,1\n4,0.1,1,1,0,1,1\n").find("follows step 5"),
            std::string::npos);
  EXPECT_NE(refused("n.csv", head + "5,0.1,1,1,0,1,1\n5,0.1,1,1,1,1,1\n6,0.1,1,1,0,1,1\n")
                .find("has 1 rows of k, the first one 2"),
            std::string::npos);
  EXPECT_NE(refused("missing.csv", head + "5,0.1,1,1,0,1\n").find("line 2"), std::string::npos);
  EXPECT_NE(MessageOf([&] { learners::ReadTrainLog(tmp / "none.csv"); }).find("none.csv"),
            std::string::npos);
}

// Two paths to one number: the paired difference of the re-run learners on the evaluation
// prompts, and the difference of the two logs' final evaluations. Each log value carries a
// relative rounding of at most 5e-9 (9 significant digits); the re-run is the same computation.
TEST_F(SingleThread, ConvergenceEvidenceAgreesWithBothLogs) {
  test::TempDir tmp;
  const RunAndHalf pair = TrainRunAndHalf(tmp, serial);
  const auto &f = pair.full, &h = pair.half;
  const learners::ConvergenceEvidence e = learners::TestConvergence(f, h);
  ASSERT_EQ(e.rows.size(), 5u);
  EXPECT_LT(e.log_rerun_gap, 1e-8);
  int failing = 0;
  for (const auto& r : e.rows) {
    EXPECT_EQ(r.in_window, r.k != 3 && r.k != 4) << r.k;  // d = 3
    EXPECT_NEAR(r.diff, r.half - r.full, 1e-8 * (r.half + r.full)) << r.k;
    EXPECT_LE(r.lo, r.diff);
    EXPECT_GE(r.hi, r.diff);
    // (hi - lo) / 2 is 1.96 se up to the rounding of diff +- 1.96 se.
    EXPECT_NEAR(r.allowed, std::max(0.05 * r.full, (r.hi - r.lo) / 2),
                4e-16 * (std::abs(r.diff) + r.allowed))
        << r.k;
    EXPECT_EQ(r.within, std::abs(r.half - r.full) <= r.allowed);
    failing += r.in_window && !r.within;
  }
  EXPECT_EQ(e.failing, failing);
  EXPECT_EQ(e.converged, failing == 0);
  std::ostringstream csv;
  learners::WriteConvergenceCsv(csv, {e});
  const std::string table = csv.str();
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 6);
  EXPECT_NE(learners::ConvergenceSummary(e).find(e.converged ? "converged" : "not converged"),
            std::string::npos);
}

TEST_F(SingleThread, ConvergenceRefusesPairsThatAreNotAHalfRun) {
  test::TempDir tmp;
  const RunAndHalf pair = TrainRunAndHalf(tmp, serial);
  const auto &f = pair.full, &h = pair.half;
  auto other = h;
  other.model.layers = 1;
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, other); }).find("model_config layers"),
            std::string::npos);
  other = h;
  other.train.steps = 12;
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, other); }).find("12 is not half of 20"),
            std::string::npos);
  other = h;
  other.train.warmup = 2;
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, other); }).find("warmup: 2 is not half"),
            std::string::npos);
  other = h;
  other.train.lr = 1e-2;
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, other); }).find("train_config lr"),
            std::string::npos);
  // Another seed and another kernel arithmetic are the same recipe.
  other = h;
  other.train.seed = 9;
  other.model.kernels = 1;
  EXPECT_EQ(learners::HalfRunMismatch(f, other), "");
  // An unfinished full run.
  const auto part = TrainWithLog(pair.full_config, tmp / "part.h5", serial, /*stop_after=*/10);
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(part, h); }).find("is at step 10 of 20"),
            std::string::npos);
  // A log that lacks the final evaluation, and no log at all.
  const std::string text = test::ReadFile(tmp / "half.train.csv");
  std::string cut = text.substr(0, text.find("\n10,"));
  std::ofstream(tmp / "half.train.csv") << cut << "\n";
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, h); }).find("ends at step 5"),
            std::string::npos)
      << MessageOf([&] { learners::TestConvergence(f, h); });
  std::filesystem::remove(tmp / "half.train.csv");
  EXPECT_NE(MessageOf([&] { learners::TestConvergence(f, h); }).find("half.train.csv"),
            std::string::npos);
}

// Two paths to the prediction at an edited query state: the whole prefix run on from state l
// (RunFrom, every position recomputed) and the query rows alone against the context's states
// known at every layer (QueriesFrom, what DAS's query interchange runs). No earlier position
// depends on a later one, so the two differ by float32 summation order only (the fused
// attention of kernels 3 against plain matmuls): |diff| <= 1e-5 max(1, |prediction|), the
// tolerance of the other two-path tests here. Two queries at different positions in one call,
// with and without LayerNorm, from the embedding and from a middle state.
TEST(Transformer, QueriesFromKnownContextStatesEqualRunFrom) {
  for (const std::string norm : {"layer", "none"}) {
    torch::manual_seed(11);
    ModelConfig c = Tiny(3);
    c.norm = norm;
    Transformer m(c);
    torch::NoGradGuard no_grad;
    const auto tokens = torch::randn({4, 10, 4});
    learners::ForwardOptions fo;
    fo.hidden_states = true;
    const auto run = m->Run(tokens, fo);
    for (const int layer : {0, 2}) {
      const std::vector<std::int64_t> ks = {2, 4};
      const auto push = torch::randn({4, 2, 16});
      std::vector<torch::Tensor> context;
      for (int j = layer; j < c.layers; ++j)
        context.push_back(run.hidden[j].slice(1, 0, 2 * ks.back()));
      torch::Tensor hq =
          torch::stack(
              {run.hidden[layer].select(1, 2 * ks[0]), run.hidden[layer].select(1, 2 * ks[1])}, 1) +
          push;
      const auto fast = m->QueriesFrom(layer, context, hq, {2 * ks[0], 2 * ks[1]});
      ASSERT_EQ(fast.sizes(), (std::vector<std::int64_t>{4, 2}));
      for (int q = 0; q < 2; ++q) {
        auto edited = run.hidden[layer].slice(1, 0, 2 * ks[q] + 1).clone();
        edited.select(1, 2 * ks[q]).add_(push.select(1, q));
        const auto slow = m->RunFrom(layer, edited).select(1, ks[q]);
        const auto bound = 1e-5 * slow.abs().clamp_min(1.0);
        EXPECT_TRUE(((fast.select(1, q) - slow).abs() <= bound).all().item<bool>())
            << norm << " layer " << layer << " query " << q << "\n"
            << fast.select(1, q) << slow;
      }
    }
  }
}

// Two paths to a shifted query's prediction: all n queries of a prompt in one pass of 3n tokens
// (TransformerPredictions, QueryForward) and each query at the end of its own sequence of
// 2k + 1 tokens (QueryPredictions). The tolerance is BatchedQueriesEqualOneAtATime's: float32
// passes of different lengths and batch sizes agree to |diff| <= 1e-5 max(1, |prediction|).
TEST(Transformer, ShiftedQueriesInOnePassEqualTheirOwnSequences) {
  torch::manual_seed(7);
  Transformer m(Tiny(2));
  data::TaskConfig t;
  t.d = 3;
  t.n = 5;
  t.query_shift = data::ParseShift("scale:2", "query_shift");
  const auto set = data::SamplePrompts(t, 4, 0, 3);
  const arma::mat all = learners::TransformerPredictions(m, set, /*batch=*/2);  // n x N
  const arma::mat err = learners::TransformerErrors(m, set, /*batch=*/2);
  for (std::size_t i = 0; i < set.size(); ++i)
    for (int k = 0; k < t.n; ++k) {
      const arma::mat q = set.query_x.slice(i).col(k);
      const double single = learners::QueryPredictions(m, set, i, k, q)(0);
      EXPECT_NEAR(all(k, i), single, 1e-5 * std::max(1.0, std::abs(single))) << i << " " << k;
      // The error is against the query's own label.
      const double e = (all(k, i) - set.query_y(k, i)) * (all(k, i) - set.query_y(k, i)) / t.d;
      EXPECT_NEAR(err(k, i), e, 1e-12 * std::max(1.0, e));
    }
}

namespace {

// The bottleneck learner of the tests below: L = 4 blocks, the y-tokens' state 2 the bottleneck.
ModelConfig BottleneckTiny(const std::string& norm) {
  ModelConfig c;
  c.d = 3;
  c.n_max = 6;
  c.layers = 4;
  c.hidden = 16;
  c.heads = 2;
  c.norm = norm;
  c.kernels = 3;
  c.bottleneck = 2;
  return c;
}

// Largest |a - b|, as a double.
double MaxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace

// Hand-written masks over T = 4 (x at 0, y at 1, x at 2, y at 3), 1 = blocked.
TEST(BottleneckMask, FourPositionHandExample) {
  const auto early = torch::tensor({0, 1, 1, 1,   // x: itself only
                                    0, 0, 1, 1,   // y: causal
                                    1, 1, 0, 1,   // x: itself only
                                    0, 0, 0, 0})  // y: causal
                         .view({4, 4})
                         .to(torch::kBool);
  const auto late = torch::tensor({0, 1, 1, 1,   // x: itself (no y before it)
                                   1, 0, 1, 1,   // y: itself only
                                   1, 0, 0, 1,   // x: the y before it and itself
                                   1, 1, 1, 0})  // y: itself only
                        .view({4, 4})
                        .to(torch::kBool);
  for (int block = 1; block <= 2; ++block)
    EXPECT_TRUE(torch::equal(learners::BottleneckMask(2, block, 4), early)) << block;
  for (int block = 3; block <= 4; ++block)
    EXPECT_TRUE(torch::equal(learners::BottleneckMask(2, block, 4), late)) << block;
  // Run returns attention weights that are exactly 0 where blocked (exp(-inf) = 0), and rows
  // that still sum to 1 (see ReturnsEveryHiddenStateAndAttention for the tolerance).
  torch::manual_seed(21);
  Transformer m(BottleneckTiny("layer"));
  torch::NoGradGuard no_grad;
  const auto r = m->Run(torch::randn({2, 12, 4}), {/*hidden_states=*/false, /*attention=*/true});
  ASSERT_EQ(r.attention.size(), 4u);
  for (int block = 1; block <= 4; ++block) {
    const auto& a = r.attention[block - 1];
    const auto blocked = learners::BottleneckMask(2, block, 12);
    EXPECT_EQ(a.masked_select(blocked.expand_as(a)).abs().max().item<float>(), 0.0f) << block;
    EXPECT_TRUE(torch::allclose(a.sum(-1), torch::ones({2, 2, 12}))) << block;
  }
}

// The prediction at the x-token of example k + 1 (position 2k) is a function of x_{k+1} and of
// state l = 2 of the y-token at 2k - 1 only. Each invariance below is exact by construction:
// same shapes, so the same kernels in the same order, and what differs enters only through
// attention weights that are exactly 0 (exp(-inf)), where acc + 0 * v == acc for finite v. Through
// every entry point: forward, Run, RunFrom, QueryForward and QueriesFrom.
TEST(Transformer, BottleneckPredictionSeesTheContextOnlyThroughOneState) {
  for (const std::string norm : {"layer", "none"}) {
    torch::manual_seed(17);
    const ModelConfig c = BottleneckTiny(norm);
    const int l = c.bottleneck;
    Transformer m(c);
    torch::NoGradGuard no_grad;
    const auto tokens = Tokens(3, 6, 5);
    learners::ForwardOptions fo;
    fo.hidden_states = true;
    const auto run = m->Run(tokens, fo);
    ASSERT_TRUE(torch::equal(run.predictions, m->forward(tokens))) << norm;
    for (int k = 1; k < 6; ++k) {
      const auto want = run.predictions.select(1, k);
      const auto open = [&](int t) { return t == 2 * k || t == 2 * k - 1; };
      // (a) Edits of state s >= l anywhere but at 2k - 1 and 2k.
      for (int s = l; s <= c.layers; ++s) {
        auto edited = run.hidden[s].clone();
        for (int t = 0; t < 12; ++t)
          if (!open(t)) edited.select(1, t).add_(torch::randn({3, 16}));
        EXPECT_TRUE(torch::equal(m->RunFrom(s, edited).select(1, k), want))
            << norm << " k=" << k << " state " << s;
      }
      // (b) Another context that keeps x_{k+1} and the bottleneck state: the tokens after 2k
      // (every mask is causal) ...
      auto later = tokens.clone();
      later.slice(1, 2 * k + 1).add_(torch::randn({3, 12 - 2 * k - 1, 4}));
      EXPECT_TRUE(torch::equal(m->forward(later).select(1, k), want)) << norm << " k=" << k;
      EXPECT_TRUE(torch::equal(m->Run(later, {}).predictions.select(1, k), want));
      // ... or a wholly other prompt B, with A's state l spliced in at 2k - 1. B keeps A's x_{k+1}
      // at 2k, whose state l is then A's too (x-tokens see only themselves up to block l).
      auto other = torch::randn({3, 12, 4});
      other.select(1, 2 * k).copy_(tokens.select(1, 2 * k));
      const auto run_b = m->Run(other, fo);
      EXPECT_TRUE(torch::equal(run_b.hidden[l].select(1, 2 * k), run.hidden[l].select(1, 2 * k)));
      auto spliced = run_b.hidden[l].clone();
      spliced.select(1, 2 * k - 1).copy_(run.hidden[l].select(1, 2 * k - 1));
      EXPECT_TRUE(torch::equal(m->RunFrom(l, spliced).select(1, k), want)) << norm << " k=" << k;
      // (c) ... while an edit of the bottleneck state itself moves the prediction.
      auto pushed = run.hidden[l].clone();
      pushed.select(1, 2 * k - 1).add_(torch::randn({3, 16}));
      EXPECT_GT(MaxDiff(m->RunFrom(l, pushed).select(1, k), want), 1e-6) << norm << " k=" << k;
    }
    // The query paths. QueryForward: query k is x_{k+1} at 2k; the context after 2k - 1 (its own
    // x at 2k included) is not the query's sequence, and the rest enters only through 2k - 1.
    std::vector<std::int64_t> positions;
    for (int k = 0; k < 6; ++k)
      positions.push_back(2 * k);
    const auto queries = torch::randn({3, 6, 3});
    const auto q_want = m->QueryForward(tokens, queries, positions);
    for (int k = 1; k < 6; ++k) {
      auto later = tokens.clone();
      later.slice(1, 2 * k).add_(torch::randn({3, 12 - 2 * k, 4}));
      EXPECT_TRUE(torch::equal(m->QueryForward(later, queries, positions).select(1, k),
                               q_want.select(1, k)))
          << norm << " k=" << k;
      auto earlier = tokens.clone();
      earlier.slice(1, 0, 2 * k - 1).add_(1.0);  // before the bottleneck's token: it moves
      EXPECT_GT(
          MaxDiff(m->QueryForward(earlier, queries, positions).select(1, k), q_want.select(1, k)),
          1e-6)
          << norm << " k=" << k;
    }
    // QueriesFrom from state l: context states l..L-1 replaced everywhere but at 2k - 1 leave
    // the query's prediction; a push of the bottleneck's state l moves it.
    for (int k = 1; k < 6; ++k) {
      std::vector<torch::Tensor> context, noisy;
      for (int j = l; j < c.layers; ++j) {
        context.push_back(run.hidden[j].slice(1, 0, 2 * k));
        auto n = torch::randn({3, 2 * k, 16});
        n.select(1, 2 * k - 1).copy_(run.hidden[j].select(1, 2 * k - 1));
        noisy.push_back(n);
      }
      const auto hq = run.hidden[l].slice(1, 2 * k, 2 * k + 1);
      const auto fast = m->QueriesFrom(l, context, hq, {2 * k});
      EXPECT_TRUE(torch::equal(m->QueriesFrom(l, noisy, hq, {2 * k}), fast)) << norm << " k=" << k;
      auto pushed = context;
      pushed[0] = context[0].clone();
      pushed[0].select(1, 2 * k - 1).add_(torch::randn({3, 16}));
      EXPECT_GT(MaxDiff(m->QueriesFrom(l, pushed, hq, {2 * k}), fast), 1e-6) << norm << " k=" << k;
    }
    // Example 1's prediction (k = 0) has no y-token before it: a function of x_1 alone.
    auto rest = torch::randn({3, 12, 4});
    rest.select(1, 0).copy_(tokens.select(1, 0));
    EXPECT_TRUE(torch::equal(m->forward(rest).select(1, 0), run.predictions.select(1, 0)));
  }
}

// Without the option nothing changes: no mask is passed, so every block takes the path it took
// before bottleneck existed (the fused causal attention of kernels 3), which the explicit loop
// below reproduces bit for bit; Run, RunFrom and forward agree exactly as in
// RunFromAnyStateReproducesTheForwardPass, and QueryForward within the float32 tolerance of
// BatchedQueriesEqualOneAtATimeForwardPasses. The file text has no "bottleneck" key.
TEST(Transformer, WithoutBottleneckEveryPathIsTheCausalOne) {
  ModelConfig c = BottleneckTiny("layer");
  c.bottleneck = 0;
  EXPECT_EQ(c.ToJson().find("bottleneck"), std::string::npos);
  torch::manual_seed(17);
  Transformer m(c);
  torch::NoGradGuard no_grad;
  const auto tokens = Tokens(3, 6, 5);
  auto h = m->input_proj(tokens) + m->pos_embed.slice(0, 0, 12);
  const auto embedding = h;
  for (int b = 0; b < c.layers; ++b)
    h = m->blocks[b]->as<learners::Block>()->forward(h);
  const auto x_states = h.slice(1, 0, 12, 2);
  const auto by_hand = m->readout(m->final_ln(x_states)).squeeze(-1);
  const auto pred = m->forward(tokens);
  EXPECT_TRUE(torch::equal(pred, by_hand));
  const auto run = m->Run(tokens, {/*hidden_states=*/true, /*attention=*/true});
  EXPECT_TRUE(torch::equal(run.predictions, pred));
  EXPECT_TRUE(torch::equal(run.hidden[0], embedding));
  EXPECT_TRUE(torch::equal(m->RunFrom(0, run.hidden[0]), pred));
  for (const auto& a : run.attention)
    EXPECT_EQ(a.triu(1).abs().max().item<float>(), 0.0f);
  // The same weights under a bottleneck give other predictions (the masks do bind).
  c.bottleneck = 2;
  torch::manual_seed(17);
  Transformer b(c);
  EXPECT_GT(MaxDiff(b->forward(tokens), pred), 1e-6);
  // QueryForward with the context's own x as queries: each query's own sequence is the prefix.
  std::vector<std::int64_t> positions = {0, 2, 4, 6, 8, 10};
  const auto queries = tokens.slice(1, 0, 12, 2).slice(2, 1, 4);
  const auto via_queries = m->QueryForward(tokens, queries, positions);
  EXPECT_TRUE(((via_queries - pred).abs() <= 1e-5 * pred.abs().clamp_min(1.0)).all().item<bool>())
      << via_queries << pred;
}

// A bottleneck learner's two query paths against the whole sequence: QueryForward (every query in
// one pass, the context's own x as queries) against forward, and QueriesFrom against RunFrom
// on an edited query state, as QueriesFromKnownContextStatesEqualRunFrom. All are LibTorch's
// operators (the masks skip the fused kernel) but with other shapes and summation orders: the
// float32 tolerance of the other two-path tests here, |diff| <= 1e-5 max(1, |prediction|).
TEST(Transformer, BottleneckQueryPathsEqualTheWholeSequence) {
  for (const std::string norm : {"layer", "none"}) {
    torch::manual_seed(19);
    const ModelConfig c = BottleneckTiny(norm);
    Transformer m(c);
    torch::NoGradGuard no_grad;
    const auto tokens = Tokens(4, 6, 5);
    const auto pred = m->forward(tokens);
    const auto queries = tokens.slice(1, 0, 12, 2).slice(2, 1, 4);
    const auto via_queries = m->QueryForward(tokens, queries, {0, 2, 4, 6, 8, 10});
    EXPECT_TRUE(((via_queries - pred).abs() <= 1e-5 * pred.abs().clamp_min(1.0)).all().item<bool>())
        << norm << "\n"
        << via_queries << pred;
    learners::ForwardOptions fo;
    fo.hidden_states = true;
    const auto run = m->Run(tokens, fo);
    for (const int layer : {0, 1, 2, 3}) {
      const std::vector<std::int64_t> ks = {2, 5};
      const auto push = torch::randn({4, 2, 16});
      std::vector<torch::Tensor> context;
      for (int j = layer; j < c.layers; ++j)
        context.push_back(run.hidden[j].slice(1, 0, 2 * ks.back()));
      const auto hq =
          torch::stack(
              {run.hidden[layer].select(1, 2 * ks[0]), run.hidden[layer].select(1, 2 * ks[1])}, 1) +
          push;
      const auto fast = m->QueriesFrom(layer, context, hq, {2 * ks[0], 2 * ks[1]});
      for (int q = 0; q < 2; ++q) {
        auto edited = run.hidden[layer].slice(1, 0, 2 * ks[q] + 1).clone();
        edited.select(1, 2 * ks[q]).add_(push.select(1, q));
        const auto slow = m->RunFrom(layer, edited).select(1, ks[q]);
        EXPECT_TRUE(((fast.select(1, q) - slow).abs() <= 1e-5 * slow.abs().clamp_min(1.0))
                        .all()
                        .item<bool>())
            << norm << " layer " << layer << " query " << q << "\n"
            << fast.select(1, q) << slow;
      }
    }
  }
}

// 0 is none and is not written; 1..L-1 round-trip; anything else is refused naming the setting,
// whether built in code or read from a file.
TEST(ModelConfig, BottleneckIsZeroOrAStateBetweenBlocks) {
  ModelConfig c = BottleneckTiny("layer");
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "test").bottleneck, 2);
  EXPECT_NE(c.ToJson().find("\"bottleneck\":2"), std::string::npos) << c.ToJson();
  ModelConfig none = c;
  none.bottleneck = 0;
  EXPECT_FALSE(none == c);
  EXPECT_EQ(ModelConfig::FromJson(none.ToJson(), "test").bottleneck, 0);
  for (const int bad : {4, 9, -1}) {
    ModelConfig b = c;
    b.bottleneck = bad;
    try {
      b.Validate();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.field(), "bottleneck") << e.what();
      EXPECT_NE(e.text().find("got " + std::to_string(bad)), std::string::npos) << e.what();
    }
    EXPECT_THROW({ Transformer t(b); }, core::InputError) << bad;
  }
  auto j = nlohmann::json::parse(c.ToJson());
  j["bottleneck"] = 4;  // = L
  try {
    ModelConfig::FromJson(j.dump(), "checkpoint 'a.h5' model_config");
    ADD_FAILURE() << "bottleneck = L was accepted";
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bottleneck: must be 0 (none) or in 1..L-1 = 1..3"),
              std::string::npos)
        << e.what();
  }
}

namespace {

ModelConfig DecoyTiny(int layer, const std::string& target) {
  ModelConfig c = Tiny(2);
  c.decoy_layer = layer;
  c.decoy_target = target;
  return c;
}

}  // namespace

// The decoy head reads state s of the last position and feeds nothing: the same seed gives the
// same predictions with and without it (it is registered after every other parameter), on
// every path; its reading equals the head applied to Run's state s at the last position; and
// the last token's input moves the reading but no prediction.
TEST(Decoy, HeadChangesNoPredictionAndReadsTheLastState) {
  torch::manual_seed(11);
  Transformer plain(Tiny(2));
  torch::manual_seed(11);
  Transformer decoy(DecoyTiny(1, "xty"));
  torch::NoGradGuard no_grad;
  auto tokens = torch::randn({3, 8, Tiny(2).d + 1});
  const auto want = plain->forward(tokens);
  EXPECT_TRUE(torch::equal(decoy->forward(tokens), want));
  const auto [pred, reading] = decoy->ForwardWithDecoy(tokens);
  EXPECT_TRUE(torch::equal(pred, want));
  ASSERT_EQ(reading.sizes(), (std::vector<std::int64_t>{3, Tiny(2).d}));
  const auto run = decoy->Run(tokens, {/*hidden_states=*/true, /*attention=*/false});
  EXPECT_TRUE(torch::equal(reading, decoy->decoy_head(run.hidden[1].select(1, 7))));
  auto edited = tokens.clone();
  edited.select(1, 7).add_(1.0);  // the last y-token
  const auto [pred2, reading2] = decoy->ForwardWithDecoy(edited);
  EXPECT_TRUE(torch::equal(pred2, want));
  EXPECT_FALSE(torch::equal(reading2, reading));
}

// The head's loss reaches only what lies below the state it reads. With clipping off (the global
// norm would couple every parameter) one step of AdamW, elementwise, moves block 2, the final
// LayerNorm and the readout exactly as in the same run without a decoy, and moves block 1, the
// embedding and the positions differently; the loss reported is the predictions' alone.
TEST_F(SingleThread, DecoyLossReachesOnlyTheBlocksBelowItsState) {
  test::TempDir tmp;
  auto train = TinyTrain(1);
  train.clip = 0;
  std::vector<double> losses[2];
  const ModelConfig configs[2] = {Tiny(2), DecoyTiny(1, "xty")};
  const std::string outs[2] = {tmp / "plain.h5", tmp / "decoy.h5"};
  for (int i = 0; i < 2; ++i) {
    learners::TrainCallbacks cb;
    cb.on_step = [&, i](std::int64_t, std::int64_t, double loss) { losses[i].push_back(loss); };
    learners::Train({configs[i], train, outs[i], false, -1}, serial, cb);
  }
  ASSERT_EQ(losses[0].size(), 1u);
  ASSERT_EQ(losses[1].size(), 1u);
  EXPECT_EQ(losses[0][0], losses[1][0]);
  auto pa = learners::LoadCheckpoint(outs[0])->named_parameters();
  auto pb = learners::LoadCheckpoint(outs[1])->named_parameters();
  EXPECT_TRUE(pb.contains("decoy_head.weight"));
  EXPECT_FALSE(pa.contains("decoy_head.weight"));
  for (const auto& p : pa) {
    const bool above = p.key().rfind("blocks.1.", 0) == 0 || p.key().rfind("final_ln.", 0) == 0 ||
                       p.key().rfind("readout.", 0) == 0;
    EXPECT_EQ(torch::equal(p.value(), pb[p.key()]), above) << p.key();
  }
}

TEST_F(SingleThread, DecoyIsAStateOfTheModelWithATargetTheTaskDefines) {
  const ModelConfig c = DecoyTiny(2, "xty");
  const ModelConfig back = ModelConfig::FromJson(c.ToJson(), "test");
  EXPECT_EQ(back.decoy_layer, 2);
  EXPECT_EQ(back.decoy_target, "xty");
  EXPECT_EQ(Tiny(2).ToJson().find("decoy"), std::string::npos);  // none: not written
  const std::pair<int, std::string> bad[] = {
      {3, "xty"}, {-1, "xty"}, {1, "w"}, {1, ""}, {0, "xty"}};
  for (const auto& [layer, target] : bad) {
    try {
      DecoyTiny(layer, target).Validate();
      ADD_FAILURE() << layer << " " << target << " was accepted";
    } catch (const core::InputError& e) {
      EXPECT_TRUE(e.field() == "decoy_layer" || e.field() == "decoy_target") << e.what();
    }
  }
  // sigma is drawn only by a noise-mix task.
  test::TempDir tmp;
  try {
    learners::Train({DecoyTiny(1, "sigma"), TinyTrain(1), tmp / "s.h5", false, -1}, serial);
    FAIL() << "sigma on a Gaussian task was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.field(), "decoy_target") << e.what();
  }
}
