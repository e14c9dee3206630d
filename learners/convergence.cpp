// The convergence rule and its evidence (learners/convergence.hpp).
#include "learners/convergence.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "learners/train_log.hpp"
#include "learners/trainer.hpp"

namespace icl::learners {

std::string HalfRunMismatch(const CheckpointInfo& full, const CheckpointInfo& half) {
  const std::string recipe = RecipeDifference(
      full, half, {"seed", "shards", "save_every", "eval_every", "steps", "warmup"});
  if (!recipe.empty()) return recipe;
  if (2 * half.train.steps != full.train.steps)
    return fmt::format("train_config steps: {} is not half of {}", half.train.steps,
                       full.train.steps);
  if (half.train.WarmupSteps() != full.train.WarmupSteps() / 2)
    return fmt::format("train_config warmup: {} is not half of {}", half.train.WarmupSteps(),
                       full.train.WarmupSteps());
  return "";
}

namespace {

// The log beside a finished checkpoint, its last evaluation at the checkpoint's step.
TrainLogEval FinalEvaluation(const CheckpointInfo& info) {
  const std::string module = "checkpoint '" + info.path + "'";
  if (info.step != info.train.steps)
    throw core::InputError(module, "",
                           fmt::format("is at step {} of {}; the convergence rule compares "
                                       "finished runs (continue it with train {{resume}})",
                                       info.step, info.train.steps));
  const std::string path = TrainLogPath(info.path);
  const TrainLog log = ReadTrainLog(path);
  if (log.evals.empty() || log.evals.back().step != info.step)
    throw core::InputError("training log '" + path + "'", "",
                           fmt::format("ends at step {}, but its checkpoint is at step {}; the "
                                       "final evaluation is missing",
                                       log.evals.empty() ? 0 : log.evals.back().step, info.step));
  if (static_cast<int>(log.evals.back().model_error.n_elem) != info.train.task.n)
    throw core::InputError("training log '" + path + "'", "",
                           fmt::format("has {} values of k, but its checkpoint trained on n = {}",
                                       log.evals.back().model_error.n_elem, info.train.task.n));
  return log.evals.back();
}

}  // namespace

ConvergenceEvidence TestConvergence(const CheckpointInfo& full, const CheckpointInfo& half) {
  const std::string mismatch = HalfRunMismatch(full, half);
  if (!mismatch.empty())
    throw core::InputError(
        "checkpoint '" + half.path + "'", "",
        "is not a half-budget run of the recipe of '" + full.path + "' (" + mismatch + ")");
  const TrainLogEval f = FinalEvaluation(full), h = FinalEvaluation(half);
  const TrainConfig& tc = full.train;
  const data::PromptSet set = data::SamplePrompts(tc.task, tc.eval_seed, 0, tc.eval_prompts);
  Transformer full_model = LoadCheckpoint(full.path), half_model = LoadCheckpoint(half.path);
  const arma::mat ef = TransformerErrors(full_model, set), eh = TransformerErrors(half_model, set);
  const arma::mat diff = eh - ef;  // n x N, paired by prompt
  const double N = static_cast<double>(diff.n_cols);

  ConvergenceEvidence e;
  e.full_path = full.path, e.half_path = half.path;
  e.full_steps = full.step, e.half_steps = half.step;
  e.eval_prompts = tc.eval_prompts, e.eval_seed = tc.eval_seed;
  e.converged = true;
  const int d = tc.task.d;
  for (arma::uword k = 0; k < diff.n_rows; ++k) {
    ConvergenceRow r;
    r.k = static_cast<int>(k);
    r.in_window = r.k != d && r.k != d + 1;
    r.full = f.model_error(k), r.half = h.model_error(k);
    r.diff = arma::mean(diff.row(k));
    const double se = N > 1 ? arma::stddev(diff.row(k)) / std::sqrt(N) : arma::datum::inf;
    r.lo = r.diff - 1.96 * se, r.hi = r.diff + 1.96 * se;
    r.allowed = std::max(kConvergenceTolerance * r.full, 1.96 * se);
    r.within = std::abs(r.half - r.full) <= r.allowed;
    for (const auto& [log_value, rerun] :
         {std::pair{r.full, arma::mean(ef.row(k))}, std::pair{r.half, arma::mean(eh.row(k))}})
      if (log_value > 0)
        e.log_rerun_gap = std::max(e.log_rerun_gap, std::abs(rerun - log_value) / log_value);
    if (r.in_window && !r.within) {
      e.converged = false;
      ++e.failing;
      const double rel = r.full > 0 ? std::abs(r.half - r.full) / r.full : arma::datum::inf;
      if (e.worst_k < 0 || rel > e.worst_relative) e.worst_k = r.k, e.worst_relative = rel;
    }
    e.rows.push_back(r);
  }
  return e;
}

std::string ConvergenceSummary(const ConvergenceEvidence& e) {
  int window = 0;
  for (const auto& r : e.rows)
    window += r.in_window;
  const std::string basis =
      fmt::format("{} steps vs {} of '{}', {} evaluation prompts of seed {}, k != d, d + 1",
                  e.full_steps, e.half_steps, e.half_path, e.eval_prompts, e.eval_seed);
  if (e.converged)
    return fmt::format(
        "converged: the half run is within max({:g}%, paired 95% interval) at "
        "all {} k ({})",
        100 * kConvergenceTolerance, window, basis);
  const ConvergenceRow& w = e.rows[static_cast<std::size_t>(e.worst_k)];
  return fmt::format(
      "not converged: the half run is outside max({:g}%, paired 95% interval) at "
      "{} of {} k; worst k = {}: {:.4g} vs {:.4g} ({:+.0f}%) ({})",
      100 * kConvergenceTolerance, e.failing, window, w.k, w.half, w.full,
      100 * (w.half - w.full) / w.full, basis);
}

void WriteConvergenceCsv(std::ostream& os, const std::vector<ConvergenceEvidence>& all) {
  os << "checkpoint,half,k,in_window,full_error,half_error,diff,diff_lo,diff_hi,allowed,within\n";
  for (const auto& e : all)
    for (const auto& r : e.rows)
      os << fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{}\n",
                        core::CsvField(e.full_path), core::CsvField(e.half_path), r.k,
                        r.in_window ? 1 : 0, r.full, r.half, r.diff, r.lo, r.hi, r.allowed,
                        r.within ? 1 : 0);
}

void PrintConvergence(std::ostream& os, const ConvergenceEvidence& e) {
  os << fmt::format("convergence of {} against the half-budget run {}\n", e.full_path, e.half_path);
  os << fmt::format("  {:>4} {:>11} {:>11} {:>8} {:>24} {:>10}  {}\n", "k", "full", "half",
                    "change", "paired half-full [95%]", "allowed", "");
  for (const auto& r : e.rows)
    os << fmt::format(
        "  {:>4} {:>11.4e} {:>11.4e} {:>+7.1f}% {:>+11.2e} [{:+.1e}, {:+.1e}] "
        "{:>9.2e}  {}\n",
        r.k, r.full, r.half, r.full > 0 ? 100 * (r.half - r.full) / r.full : 0.0, r.diff, r.lo,
        r.hi, r.allowed,
        !r.in_window ? "(k = d or d + 1: not in the rule)" : (r.within ? "within" : "OUTSIDE"));
  if (e.log_rerun_gap > 1e-3)
    os << fmt::format(
        "  note: the re-run differs from the logs' final evaluation by up to {:.2g} "
        "relative; the logs are not this checkpoint's or its arithmetic changed\n",
        e.log_rerun_gap);
  os << "  " << ConvergenceSummary(e) << "\n";
}

}  // namespace icl::learners
