// The training loop of transformer learners.
#include "learners/trainer.hpp"
#include "data/errors.hpp"

#include <cmath>
#include <exception>
#include <stdexcept>
#include <thread>

#include "data/output.hpp"
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
    throw std::invalid_argument("train: model d=" + std::to_string(model.d) +
                                " but task d=" + std::to_string(task.d));
  if (task.n > model.n_max)
    throw std::invalid_argument(
        "train: prompts of n=" + std::to_string(task.n) +
        " examples exceed the model's n_max=" + std::to_string(model.n_max));
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
    const auto pred =
        model->forward(data::TokenTensor(set, b, count)).to(torch::kFloat64).contiguous();
    // pred [count, n] row-major == n x count column-major.
    out.cols(b, b + count - 1) = arma::mat(pred.data_ptr<double>(), n, count);
  }
  model->train(was_training);
  return out;
}

arma::mat TransformerErrors(Transformer& model, const data::PromptSet& set, int batch) {
  return arma::square(TransformerPredictions(model, set, batch) - set.y) / set.task.d;
}

arma::mat QueryPredictionsAllK(Transformer& model, const data::PromptSet& set, std::size_t prompt,
                               const arma::cube& queries) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int d = set.task.d, n = set.task.n;
  const long q = queries.n_cols;
  // Row (k, j): the prompt's tokens with x_{k+1} replaced by query j; later tokens are ignored.
  auto tokens = data::TokenTensor(set, prompt, 1).expand({n * q, 2L * n, d + 1L}).clone();
  const arma::fcube qf = arma::conv_to<arma::fcube>::from(queries);  // d x Q x n == [n, Q, d]
  const auto qt = torch::from_blob(const_cast<float*>(qf.memptr()), {n, q, static_cast<long>(d)});
  auto view = tokens.view({n, q, 2L * n, d + 1L});
  for (int k = 0; k < n; ++k)
    view[k].select(1, 2 * k).slice(1, 1, d + 1).copy_(qt[k]);
  const auto pred = model->forward(tokens).view({n, q, n});  // [k, j, x-token index]
  auto out = torch::empty({n, q}, torch::kFloat64);
  for (int k = 0; k < n; ++k)
    out[k].copy_(pred[k].select(1, k));
  model->train(was_training);
  return arma::mat(out.data_ptr<double>(), q, n);  // [n, Q] row-major == Q x n
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

TrainResult Train(const TrainRequest& req, const TrainCallbacks& cb) {
  // One writer per checkpoint for the whole run (every save replaces the file).
  std::unique_ptr<data::OutputLock> lock;
  if (req.lock) lock = std::make_unique<data::OutputLock>(req.out, "out");
  ModelConfig mc = req.model;
  TrainConfig tc = req.train;
  std::int64_t step = 0;
  Transformer model{nullptr};
  if (req.resume) {
    CheckpointInfo info;
    model = LoadCheckpoint(req.out, &info);
    mc = info.model;
    tc = info.train;
    step = info.step;
  } else {
    mc.Validate();
    tc.Validate();
    CheckCompatible(mc, tc.task);
    torch::manual_seed(tc.seed);
    model = Transformer(mc);
  }
  model->train();

  // One flat buffer for all parameters: the update is a few large kernels (flat_adamw.hpp).
  FlatAdamW optimizer(*model, {tc.lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  if (req.resume) optimizer.Restore(LoadOptimizerState(req.out, model));
  // Data parallelism over the batch's shards: shard 0 runs on `model`, shard s on replica s,
  // whose parameters are copied from the model before each step and whose gradient is added to
  // the model's in shard order after it (fixed arithmetic, whatever the number of threads).
  const int shards = std::min(tc.shards, tc.batch);
  std::vector<Transformer> replicas;
  std::vector<std::unique_ptr<FlatAdamW>> replica_buffers;
  for (int s = 1; s < shards; ++s) {
    replicas.emplace_back(mc);
    replicas.back()->train();
    replica_buffers.push_back(std::make_unique<FlatAdamW>(*replicas.back(), AdamWSettings{}));
  }
  const int workers = std::max(1, std::min(req.workers, shards));

  // Held-out prompts: a fixed seed, so every run is evaluated on the same set.
  const data::PromptSet eval_set = data::SamplePrompts(tc.task, tc.eval_seed, 0, tc.eval_prompts);
  const double ref_lambda = tc.task.noise > 0 ? tc.task.BayesLambda() : 0.0;
  const std::string ref_name = tc.task.noise > 0 ? "bayes" : "ols";
  const arma::vec ref_error =
      arma::mean(PerPromptErrors(eval_set, RidgeLearner(ref_lambda, ref_name)), 1);

  std::int64_t last_saved = req.resume ? step : -1;
  double loss_sum = 0;
  std::int64_t loss_count = 0;
  if (req.resume) {
    if (const auto kept = LoadLossSinceEval(req.out, step, tc.eval_every)) {
      loss_sum = kept->sum;
      loss_count = kept->steps;
    } else if (cb.on_note) {
      cb.on_note(
          "the checkpoint predates the saved training loss and lies between two evaluations: "
          "the next log row averages the training loss from the resume on");
    }
  }
  const std::int64_t first = step;
  auto save = [&] {
    try {
      SaveOptions so;
      so.lock = false;  // held for the whole run above (or by the caller)
      const LossSinceEval since{loss_sum, loss_count};
      so.loss_since_eval = &since;
      const AdamMoments moments = optimizer.Moments();
      SaveCheckpoint(req.out, model, tc, step, &moments, so);
    } catch (const std::runtime_error& e) {
      const std::string kept = last_saved >= 0 ? "the last good checkpoint (step " +
                                                     std::to_string(last_saved) + ") is kept at '" +
                                                     req.out + "'"
                                               : "no checkpoint was written";
      throw std::runtime_error(std::string(e.what()) + "; training stopped at step " +
                               std::to_string(step) + ", " + kept);
    }
    last_saved = step;
    if (cb.on_save) cb.on_save(step, req.out);
  };
  auto evaluate = [&] {
    EvalRecord r;
    r.step = step;
    r.lr = tc.LearningRate(std::max<std::int64_t>(0, step - 1));
    r.train_loss = loss_count ? loss_sum / loss_count : std::nan("");
    r.model_error = arma::mean(TransformerErrors(model, eval_set), 1);
    r.ref_error = ref_error;
    r.ref_name = ref_name;
    r.eval_loss = arma::mean(r.model_error);
    loss_sum = 0;
    loss_count = 0;
    if (cb.on_eval) cb.on_eval(r);
  };

  while (step < tc.steps) {
    if (req.stop_after_steps >= 0 && step - first >= req.stop_after_steps) break;
    // Prompts of step s are prompts [s B, (s + 1) B) of the training stream: a function of
    // (seed, step) only, which makes resuming exact without saving a sampler state.
    const data::PromptSet batch = data::SamplePrompts(tc.task, tc.seed, step * tc.batch, tc.batch);
    const auto tokens = data::TokenTensor(batch, 0, tc.batch);
    const auto y = Targets(batch, 0, tc.batch);

    optimizer.ZeroGrad();
    {
      torch::NoGradGuard no_grad;
      for (auto& b : replica_buffers) {
        b->flat().copy_(optimizer.flat());
        b->ZeroGrad();
      }
    }
    std::vector<double> shard_loss(std::size_t(shards), 0.0);
    auto run_shard = [&](int s) {
      const std::int64_t b0 = std::int64_t(tc.batch) * s / shards,
                         b1 = std::int64_t(tc.batch) * (s + 1) / shards;
      Transformer& m = s == 0 ? model : replicas[std::size_t(s - 1)];
      // The batch's mean loss is the shards' means weighted by their share of the rows.
      const auto loss = torch::mse_loss(m->forward(tokens.slice(0, b0, b1)), y.slice(0, b0, b1)) *
                        (double(b1 - b0) / tc.batch / tc.task.d);
      loss.backward();
      shard_loss[std::size_t(s)] = loss.item<double>();
    };
    {
      std::vector<std::thread> threads;
      std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
      for (int w = 1; w < workers; ++w)
        threads.emplace_back([&, w] {
          try {
            for (int s = w; s < shards; s += workers)
              run_shard(s);
          } catch (...) {
            errors[std::size_t(w)] = std::current_exception();
          }
        });
      try {
        for (int s = 0; s < shards; s += workers)
          run_shard(s);
      } catch (...) {
        errors[0] = std::current_exception();
      }
      for (auto& t : threads)
        t.join();
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    {
      torch::NoGradGuard no_grad;
      for (auto& b : replica_buffers)
        optimizer.grad().add_(b->grad());
    }
    double loss_value = 0;
    for (double l : shard_loss)
      loss_value += l;
    if (!std::isfinite(loss_value)) {
      const std::string kept = last_saved >= 0 ? "the last good checkpoint (step " +
                                                     std::to_string(last_saved) + ") is kept at '" +
                                                     req.out + "'"
                                               : "no checkpoint was written yet";
      throw std::runtime_error("train: loss became " + std::to_string(loss_value) + " at step " +
                               std::to_string(step + 1) + "; " + kept +
                               "; try a lower {lr} or a smaller {clip}");
    }
    if (tc.clip > 0) optimizer.ClipGradNorm(tc.clip);
    optimizer.Step(tc.LearningRate(step));
    ++step;
    loss_sum += loss_value;
    ++loss_count;
    if (cb.on_step) cb.on_step(step, tc.steps, loss_value);
    if (step % tc.eval_every == 0 || step == tc.steps) evaluate();
    if (step % tc.save_every == 0 || step == tc.steps) save();
  }
  if (last_saved != step) save();
  return TrainResult{step, step >= tc.steps};
}

}  // namespace icl::learners
