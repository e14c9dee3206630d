// Training a transformer learner in context: fresh seeded prompts every step, AdamW with
// warmup + cosine decay, gradient clipping, periodic held-out evaluation against OLS, atomic
// checkpoints and exact resume. Reports through callbacks; prints nothing itself.
#pragma once

#include <armadillo>
#include <functional>
#include <string>

#include "core/thread_pool.hpp"
#include "data/task.hpp"
#include "learners/checkpoint.hpp"
#include "learners/transformer.hpp"

namespace icl::learners {

// Squared error / d of the model's predictions on `set`: n x N like PerPromptErrors.
// Prompts may be shorter than the model's n_max. Runs under NoGradGuard in batches.
arma::mat TransformerErrors(Transformer& model, const data::PromptSet& set, int batch = 500);
// The model's predictions on `set`: n x N, entry (k, i) predicts y_{k+1} of prompt i from k
// examples.
arma::mat TransformerPredictions(Transformer& model, const data::PromptSet& set, int batch = 500);
// Predictions of y for `queries` (d x Q) placed one at a time at the query position after the
// first k examples of prompt i: one forward pass over Q sequences of 2k + 1 tokens (the context
// repeated, each ending with one query x-token).
// The same for every k at once, in one forward pass of 2n + nQ tokens: queries is d x Q x n
// (slice k = the queries after k examples); returns Q x n. Each query token sees only the
// first k examples and itself (TransformerImpl::QueryForward).
arma::mat QueryPredictionsAllK(Transformer& model, const data::PromptSet& set, std::size_t prompt,
                               const arma::cube& queries);
// The same for prompts first .. first + count - 1 in batches: queries d x Q x (count n), slice
// c n + k = the queries after k examples of prompt first + c; returns Q x (count n).
arma::mat QueryPredictionsAllK(Transformer& model, const data::PromptSet& set, std::size_t first,
                               std::size_t count, const arma::cube& queries);
arma::vec QueryPredictions(Transformer& model, const data::PromptSet& set, std::size_t prompt,
                           int k, const arma::mat& queries);

struct EvalRecord {
  std::int64_t step = 0;  // steps completed
  double lr = 0;
  double train_loss = 0;  // mean loss since the previous evaluation
  double eval_loss = 0;   // mean over k of model_error
  arma::vec model_error;  // per k = 0..n-1, squared error / d, held-out prompts
  // The reference on the same prompts: the Bayes-optimal ridge of the training task,
  // lambda = noise^2 / w_scale^2, which is OLS for a noiseless task.
  arma::vec ref_error;
  std::string ref_name;  // "ols" (noiseless) or "bayes"
  // The first k at which the reference is the benchmark to match: d + 1 for OLS (below that it
  // is one of many exact fits), 0 for the Bayes ridge (optimal at every k).
  int benchmark_from_k = 0;
};

struct TrainCallbacks {
  std::function<void(std::int64_t step, std::int64_t total, double loss)> on_step;
  std::function<void(const EvalRecord&)> on_eval;
  std::function<void(std::int64_t step, const std::string& path)> on_save;
  // Something the user should know that is not an error (one line, no newline).
  std::function<void(const std::string& note)> on_note;
};

struct TrainRequest {
  ModelConfig model;
  TrainConfig train;
  std::string out;      // checkpoint path (overwritten atomically at each save)
  bool resume = false;  // continue from the checkpoint at `out`
  std::int64_t stop_after_steps =
      -1;            // stop (with a checkpoint) after this many steps of this call
  bool lock = true;  // hold the output lock for the run (false: the caller holds it)
};

struct TrainResult {
  std::int64_t step = 0;  // steps completed in total
  bool finished = false;  // reached train.steps
};

// Trains (or resumes) and returns where it stopped. A non-finite loss throws
// std::runtime_error naming the step and the last good checkpoint, which is kept.
// The pool's workers compute a batch's shards (train.shards); the results do not depend on its
// size. Each runs its kernels on the calling configuration's intra-op threads (the program
// keeps one).
TrainResult Train(const TrainRequest& request, core::ThreadPool& pool,
                  const TrainCallbacks& callbacks = {});

// Writes an untrained checkpoint (the random-initialisation control), seeded by train.seed.
void WriteInitCheckpoint(const ModelConfig& model, const TrainConfig& train, const std::string& out,
                         const SaveOptions& options = {});

}  // namespace icl::learners
