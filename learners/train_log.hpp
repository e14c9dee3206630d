// The evaluation log of a training run, <checkpoint stem>.train.csv: one row per (evaluation,
// k) with step,lr,train_loss,eval_loss,k,model_error,<ref>_error, where the reference is OLS
// (noiseless task) or the Bayes ridge (noisy task). This file owns its name, header and rows.
#pragma once

#include <armadillo>
#include <cstdint>
#include <string>
#include <vector>

#include "learners/trainer.hpp"

namespace icl::learners {

// "runs/a.h5" -> "runs/a.train.csv".
std::string TrainLogPath(const std::string& checkpoint);

// Writes a fresh log holding only the header (atomically, replacing an old one).
void StartTrainLog(const std::string& path, bool noisy_task);

// True when `path` is a regular file that begins with a training log's header: with no
// checkpoint beside it, the leftover of a run stopped before its first checkpoint (nothing in it
// can be resumed), which a new run of that name may replace.
bool IsTrainLog(const std::string& path);

// Keeps the header and the rows of steps <= `step` (rows written after the last checkpoint of
// an interrupted run are evaluated again on resume); rewritten atomically. A missing log is
// left missing. Throws core::InputError (setting `field`) for a row without a step number.
void TruncateTrainLog(const std::string& path, std::int64_t step, const std::string& field);

// Appends the rows of one evaluation; throws std::runtime_error when the write fails.
void AppendTrainLog(const std::string& path, const EvalRecord& record);

// One evaluation of a log: the rows of one step, k = 0..n-1.
struct TrainLogEval {
  std::int64_t step = 0;
  double lr = 0, train_loss = 0, eval_loss = 0;
  arma::vec model_error, ref_error;  // per k, squared error / d
};
struct TrainLog {
  std::string path;
  std::string ref_name;             // "ols" or "bayes" (the header's last column)
  std::vector<TrainLogEval> evals;  // by step, increasing
};

// Reads a log written by train, treating it as hostile: the header must be train's, every row
// has seven finite numbers, each evaluation lists k = 0..n-1 in order with one n for the whole
// log, and steps increase. Throws core::InputError (module: the log) naming the line.
TrainLog ReadTrainLog(const std::string& path);

}  // namespace icl::learners
