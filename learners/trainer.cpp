// The training loop of transformer learners.
#include "learners/trainer.hpp"

#include <cmath>
#include <exception>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/errors.hpp"
#include "core/output.hpp"
#include "data/tokens_torch.hpp"
#include "learners/classical.hpp"

namespace icl::learners {

namespace {

torch::Tensor Targets(const data::PromptSet& set, std::size_t begin, std::size_t count) {
  // y is n x N column-major == row-major [N, n].
  const auto n = set.task.n;
  auto y = torch::from_blob(const_cast<double*>(set.y.colptr(begin)), {static_cast<long>(count), n},
                            torch::kFloat64);
  return y.to(torch::kFloat32);
}

void CheckCompatible(const ModelConfig& model, const data::TaskConfig& task) {
  if (model.d != task.d)
    throw core::InputError(
        "train", "",
        "model d=" + std::to_string(model.d) + " but task d=" + std::to_string(task.d));
  if (task.n > model.n_max)
    throw core::InputError("train", "",
                           "prompts of n=" + std::to_string(task.n) +
                               " examples exceed the model's n_max=" + std::to_string(model.n_max));
  if (model.decoy_target == "sigma" && task.family.kind != data::TaskFamily::Kind::kNoiseMix)
    throw core::InputError("train", "decoy_target",
                           "\"sigma\" is the noise level a noise-mix task draws per prompt; the "
                           "task '" +
                               task.family.Spec() + "' draws none");
}

// What the decoy head learns for prompts [begin, begin + count) of `set` (ModelConfig::
// decoy_target): [count, d] float32.
torch::Tensor DecoyTargets(const std::string& target, const data::PromptSet& set, std::size_t begin,
                           std::size_t count) {
  const auto d = set.task.d, n = set.task.n;
  arma::mat t(d, count);  // column-major d x count == row-major [count, d]
  for (std::size_t i = 0; i < count; ++i) {
    if (target == "xty")
      t.col(i) = set.x.slice(begin + i) * set.y.col(begin + i) / double(n);  // X'y / n
    else
      t.col(i).fill(set.task.family.sigmas.at(std::size_t(set.draw.at(begin + i))));
  }
  return torch::from_blob(t.memptr(), {static_cast<long>(count), d}, torch::kFloat64)
      .to(torch::kFloat32);
}

}  // namespace

arma::mat TransformerPredictions(Transformer& model, const data::PromptSet& set, int batch) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int n = set.task.n;
  arma::mat out(n, set.size());
  for (std::size_t b = 0; b < set.size(); b += batch) {
    const std::size_t count = std::min<std::size_t>(batch, set.size() - b);
    const auto tokens = data::TokenTensor(set, b, count);
    torch::Tensor pred;
    if (set.task.HasQueries()) {
      // Query k after the first k examples, all n in one pass (QueryForward).
      const arma::fcube q = arma::conv_to<arma::fcube>::from(
          set.query_x.slices(b, b + count - 1));  // d x n x count == [count, n, d]
      std::vector<std::int64_t> positions(static_cast<std::size_t>(n));
      for (int k = 0; k < n; ++k)
        positions[static_cast<std::size_t>(k)] = 2 * k;
      const auto qt = torch::from_blob(const_cast<float*>(q.memptr()),
                                       {static_cast<long>(count), n, set.task.d});
      pred = model->QueryForward(tokens, qt, positions).to(torch::kFloat64).contiguous();
    } else {
      pred = model->forward(tokens).to(torch::kFloat64).contiguous();
    }
    // pred [count, n] row-major == n x count column-major.
    out.cols(b, b + count - 1) = arma::mat(pred.data_ptr<double>(), n, count);
  }
  model->train(was_training);
  return out;
}

arma::mat TransformerErrors(Transformer& model, const data::PromptSet& set, int batch) {
  const arma::mat& truth = set.task.HasQueries() ? set.query_y : set.y;
  return arma::square(TransformerPredictions(model, set, batch) - truth) / set.task.d;
}

arma::mat QueryPredictionsAllK(Transformer& model, const data::PromptSet& set, std::size_t first,
                               std::size_t count, const arma::cube& queries) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const long d = set.task.d, n = set.task.n, q = queries.n_cols;
  if (queries.n_rows != arma::uword(d) || queries.n_slices != count * n)
    throw std::logic_error("QueryPredictionsAllK: queries must be d x Q x (count n)");
  // Per prompt one sequence: the prompt, then its n Q queries, (k, j) at the x-token position
  // 2k. Sub-batches keep the attention scores (B x heads x (n Q (2n + 1) + (2n)^2) floats: each
  // query against the context and itself, the context against itself) near 2^22 elements (16 MB,
  // below the mmap threshold core/process.cpp sets, so the buffers are reused, not faulted in).
  const arma::fcube qf = arma::conv_to<arma::fcube>::from(queries);  // == [count, n Q, d]
  std::vector<std::int64_t> positions(static_cast<std::size_t>(n * q));
  for (long i = 0; i < n * q; ++i)
    positions[static_cast<std::size_t>(i)] = 2 * (i / q);
  const long scores = n * q * (2 * n + 1) + 4 * n * n;
  const std::size_t step = std::max<std::size_t>(
      1, (std::size_t(1) << 22) / static_cast<std::size_t>(scores * model->config.heads));
  arma::mat out(q, n * count);
  for (std::size_t b = 0; b < count; b += step) {
    const std::size_t c = std::min(step, count - b);
    const auto qt = torch::from_blob(const_cast<float*>(qf.slice_memptr(b * n)),
                                     {static_cast<long>(c), n * q, d});
    const auto pred = model->QueryForward(data::TokenTensor(set, first + b, c), qt, positions)
                          .to(torch::kFloat64)
                          .contiguous();  // [c, n Q] row-major == Q x (c n)
    out.cols(b * n, (b + c) * n - 1) = arma::mat(pred.data_ptr<double>(), q, c * n);
  }
  model->train(was_training);
  return out;
}

arma::mat QueryPredictionsAllK(Transformer& model, const data::PromptSet& set, std::size_t prompt,
                               const arma::cube& queries) {
  return QueryPredictionsAllK(model, set, prompt, 1, queries);
}

arma::vec QueryPredictions(Transformer& model, const data::PromptSet& set, std::size_t prompt,
                           int k, const arma::mat& queries) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int d = set.task.d;
  const long q = queries.n_cols;
  auto tokens = torch::zeros({q, 2L * k + 1, d + 1L});
  if (k > 0)
    tokens.slice(1, 0, 2 * k)
        .copy_(data::TokenTensor(set, prompt, 1, k).expand({q, 2L * k, d + 1L}));
  const arma::fmat qf = arma::conv_to<arma::fmat>::from(queries);  // d x Q == [Q, d] row-major
  tokens.select(1, 2 * k)
      .slice(1, 1, d + 1)
      .copy_(torch::from_blob(const_cast<float*>(qf.memptr()), {q, static_cast<long>(d)}));
  // Read at the query position 2k: prediction index k.
  const auto pred = model->forward(tokens).select(1, k).to(torch::kFloat64).contiguous();
  model->train(was_training);
  return arma::vec(pred.data_ptr<double>(), q);
}

void WriteInitCheckpoint(const ModelConfig& model_config, const TrainConfig& train,
                         const std::string& out, const SaveOptions& options) {
  model_config.Validate();
  train.Validate();
  CheckCompatible(model_config, train.task);
  torch::manual_seed(train.seed);
  Transformer model(model_config);
  SaveCheckpoint(out, model, train, /*step=*/0, /*optimizer=*/nullptr, options);
}

namespace {

// One training run: the model, its optimizer and shard replicas, the held-out set, and the
// steps Train() runs in order.
class Training {
 public:
  Training(const TrainRequest& req, core::ThreadPool& pool, const TrainCallbacks& cb)
      : req_(req), pool_(pool), cb_(cb) {}

  void Start();         // the model and optimizer: resumed or freshly initialised
  void MakeReplicas();  // one replica per shard but the first
  void PrepareEvaluation();
  TrainResult Run();  // steps until done (or stopped), with evaluations and saves

 private:
  double Step();  // one optimizer step; returns the batch's loss
  void Evaluate();
  void Save();
  std::string KeptCheckpoint(const std::string& none) const {
    return last_saved_ >= 0 ? "the last good checkpoint (step " + std::to_string(last_saved_) +
                                  ") is kept at '" + req_.out + "'"
                            : none;
  }

  const TrainRequest& req_;
  core::ThreadPool& pool_;
  const TrainCallbacks& cb_;
  std::unique_ptr<core::OutputLock> lock_;
  ModelConfig mc_;
  TrainConfig tc_;
  std::int64_t step_ = 0, first_ = 0, last_saved_ = -1;
  Transformer model_{nullptr};
  std::unique_ptr<FlatAdamW> optimizer_;
  int shards_ = 1;
  std::vector<Transformer> replicas_;
  std::vector<std::unique_ptr<FlatAdamW>> replica_buffers_;
  data::PromptSet eval_set_;
  arma::vec ref_error_;
  std::string ref_name_;
  double loss_sum_ = 0;  // training loss since the last evaluation
  std::int64_t loss_count_ = 0;
};

void Training::Start() {
  // One writer per checkpoint for the whole run (every save replaces the file).
  if (req_.lock) lock_ = std::make_unique<core::OutputLock>(req_.out, "out");
  mc_ = req_.model;
  tc_ = req_.train;
  if (req_.resume) {
    CheckpointInfo info;
    model_ = LoadCheckpoint(req_.out, &info);
    mc_ = info.model;
    tc_ = info.train;
    step_ = info.step;
    last_saved_ = step_;
  } else {
    mc_.Validate();
    tc_.Validate();
    CheckCompatible(mc_, tc_.task);
    torch::manual_seed(tc_.seed);
    model_ = Transformer(mc_);
  }
  first_ = step_;
  model_->train();
  // One flat buffer for all parameters: the update is a few large kernels (flat_adamw.hpp).
  optimizer_ = std::make_unique<FlatAdamW>(
      *model_, AdamWSettings{tc_.lr, tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay});
  if (!req_.resume) return;
  optimizer_->Restore(LoadOptimizerState(req_.out, model_));
  if (const auto kept = LoadLossSinceEval(req_.out, step_, tc_.eval_every)) {
    loss_sum_ = kept->sum;
    loss_count_ = kept->steps;
  } else if (cb_.on_note) {
    cb_.on_note(
        "the checkpoint predates the saved training loss and lies between two evaluations: "
        "the next log row averages the training loss from the resume on");
  }
}

// Data parallelism over the batch's shards: shard 0 runs on the model, shard s on replica s,
// whose parameters are copied from the model before each step and whose gradient is added to
// the model's in shard order after it (fixed arithmetic, whatever the number of threads).
void Training::MakeReplicas() {
  shards_ = std::min(tc_.shards, tc_.batch);
  for (int s = 1; s < shards_; ++s) {
    replicas_.emplace_back(mc_);
    replicas_.back()->train();
    replica_buffers_.push_back(std::make_unique<FlatAdamW>(*replicas_.back(), AdamWSettings{}));
  }
}

// Held-out prompts: a fixed seed, so every run is evaluated on the same set, against the
// Bayes-optimal learner (OLS for a noiseless task).
void Training::PrepareEvaluation() {
  eval_set_ = data::SamplePrompts(tc_.task, tc_.eval_seed, 0, tc_.eval_prompts);
  const double ref_lambda = tc_.task.noise > 0 ? tc_.task.BayesLambda() : 0.0;
  ref_name_ = tc_.task.noise > 0 ? "bayes" : "ols";
  ref_error_ = arma::mean(PerPromptErrors(eval_set_, RidgeLearner(ref_lambda, ref_name_)), 1);
}

double Training::Step() {
  // Prompts of step s are prompts [s B, (s + 1) B) of the training stream: a function of
  // (seed, step) only, which makes resuming exact without saving a sampler state.
  const data::PromptSet batch =
      data::SamplePrompts(tc_.task, tc_.seed, step_ * tc_.batch, tc_.batch);
  const auto tokens = data::TokenTensor(batch, 0, tc_.batch);
  const auto y = Targets(batch, 0, tc_.batch);
  optimizer_->ZeroGrad();
  {
    torch::NoGradGuard no_grad;
    for (auto& b : replica_buffers_) {
      b->flat().copy_(optimizer_->flat());
      b->ZeroGrad();
    }
  }
  std::vector<double> shard_loss(std::size_t(shards_), 0.0);
  pool_.For(shards_, [&](std::int64_t s) {
    const std::int64_t b0 = std::int64_t(tc_.batch) * s / shards_,
                       b1 = std::int64_t(tc_.batch) * (s + 1) / shards_;
    Transformer& m = s == 0 ? model_ : replicas_[std::size_t(s - 1)];
    // The batch's mean loss is the shards' means weighted by their share of the rows.
    const double share = double(b1 - b0) / tc_.batch;
    // A decoy's head: its mean squared error per coordinate joins the loss with weight 1; the
    // loss reported stays the predictions' alone, comparable with a learner without a decoy.
    torch::Tensor pred, decoy;
    if (mc_.decoy_layer)
      std::tie(pred, decoy) = m->ForwardWithDecoy(tokens.slice(0, b0, b1));
    else
      pred = m->forward(tokens.slice(0, b0, b1));
    const auto loss = torch::mse_loss(pred, y.slice(0, b0, b1)) * (share / tc_.task.d);
    auto total = loss;
    if (decoy.defined())
      total = loss + torch::mse_loss(decoy, DecoyTargets(mc_.decoy_target, batch, std::size_t(b0),
                                                         std::size_t(b1 - b0))) *
                         share;
    total.backward();
    shard_loss[std::size_t(s)] = loss.item<double>();
  });
  {
    torch::NoGradGuard no_grad;
    for (auto& b : replica_buffers_)
      optimizer_->grad().add_(b->grad());
  }
  double loss = 0;
  for (double l : shard_loss)
    loss += l;
  if (!std::isfinite(loss))
    throw std::runtime_error("train: loss became " + std::to_string(loss) + " at step " +
                             std::to_string(step_ + 1) + "; " +
                             KeptCheckpoint("no checkpoint was written yet") +
                             "; try a lower {lr} or a smaller {clip}");
  if (tc_.clip > 0) optimizer_->ClipGradNorm(tc_.clip);
  optimizer_->Step(tc_.LearningRate(step_));
  ++step_;
  return loss;
}

void Training::Evaluate() {
  EvalRecord r;
  r.step = step_;
  r.lr = tc_.LearningRate(std::max<std::int64_t>(0, step_ - 1));
  r.train_loss = loss_count_ ? loss_sum_ / loss_count_ : std::nan("");
  r.model_error = arma::mean(TransformerErrors(model_, eval_set_), 1);
  r.ref_error = ref_error_;
  r.ref_name = ref_name_;
  r.benchmark_from_k = tc_.task.noise > 0 ? 0 : tc_.task.d + 1;
  r.eval_loss = arma::mean(r.model_error);
  loss_sum_ = 0;
  loss_count_ = 0;
  if (cb_.on_eval) cb_.on_eval(r);
}

void Training::Save() {
  try {
    SaveOptions so;
    so.lock = false;  // held for the whole run (or by the caller)
    const LossSinceEval since{loss_sum_, loss_count_};
    so.loss_since_eval = &since;
    const AdamMoments moments = optimizer_->Moments();
    SaveCheckpoint(req_.out, model_, tc_, step_, &moments, so);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; training stopped at step " +
                             std::to_string(step_) + ", " +
                             KeptCheckpoint("no checkpoint was written"));
  }
  last_saved_ = step_;
  if (cb_.on_save) cb_.on_save(step_, req_.out);
}

TrainResult Training::Run() {
  while (step_ < tc_.steps) {
    if (req_.stop_after_steps >= 0 && step_ - first_ >= req_.stop_after_steps) break;
    const double loss = Step();
    loss_sum_ += loss;
    ++loss_count_;
    if (cb_.on_step) cb_.on_step(step_, tc_.steps, loss);
    if (step_ % tc_.eval_every == 0 || step_ == tc_.steps) Evaluate();
    if (step_ % tc_.save_every == 0 || step_ == tc_.steps) Save();
  }
  if (last_saved_ != step_) Save();
  return TrainResult{step_, step_ >= tc_.steps};
}

}  // namespace

TrainResult Train(const TrainRequest& req, core::ThreadPool& pool, const TrainCallbacks& cb) {
  Training run(req, pool, cb);
  run.Start();
  run.MakeReplicas();
  run.PrepareEvaluation();
  return run.Run();
}

}  // namespace icl::learners
