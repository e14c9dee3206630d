// The convergence rule of iclprobe's learners and its evidence, from a run and a run of the same
// recipe with half the steps: their evaluation logs, and both checkpoints re-run on the logs'
// evaluation prompts for the paired interval. Fixed before the behaviour learners finished
// (checkpoints/README.md): a learner counts as converged when the half run's held-out error / d
// is, at every k outside {d, d + 1}, within max(5% of the full run's, the half-width of the
// paired 95% interval) of the full run's. (A slope test on the last steps cannot work: the
// cosine schedule flattens every run at its end.)
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "learners/checkpoint.hpp"

namespace icl::learners {

inline constexpr double kConvergenceTolerance = 0.05;  // relative, of the full run's error

struct ConvergenceRow {
  int k = 0;
  bool in_window = true;      // k not in {d, d + 1}: the rule applies here
  double full = 0, half = 0;  // the final evaluations' error / d, from the logs
  // half - full, mean over the evaluation prompts of the paired per-prompt difference (both
  // checkpoints re-run), with its 95% interval (normal approximation).
  double diff = 0, lo = 0, hi = 0;
  double allowed = 0;   // max(tolerance * full, (hi - lo) / 2)
  bool within = false;  // |half - full| <= allowed
};

struct ConvergenceEvidence {
  std::string full_path, half_path;
  std::int64_t full_steps = 0, half_steps = 0;
  int eval_prompts = 0;
  std::uint64_t eval_seed = 0;
  std::vector<ConvergenceRow> rows;  // k = 0..n-1
  bool converged = false;            // every in-window row within
  int failing = 0;                   // in-window rows outside
  int worst_k = -1;                  // the in-window k with the largest |half - full| / full
  double worst_relative = 0;
  // The largest relative difference between a log's final error and the re-run's mean: 0 up
  // to float rounding when the re-run uses the arithmetic of the run (kernels differ: ~1e-6).
  double log_rerun_gap = 0;
};

// "" when `half` is a half-budget run of `full`'s recipe: the same model and training
// configuration except the seed, shards, save_every, eval_every, steps (half's twice full's)
// and warmup (half's, rounded down, of full's); otherwise what differs.
std::string HalfRunMismatch(const CheckpointInfo& full, const CheckpointInfo& half);

// The evidence for `full` (both runs finished, their logs <stem>.train.csv beside them ending
// at the checkpoints' steps). Re-runs both learners on the logs' evaluation prompts. Throws
// core::InputError (module: the checkpoint or log at fault) when the pair does not qualify.
ConvergenceEvidence TestConvergence(const CheckpointInfo& full, const CheckpointInfo& half);

// One line: "converged (...)" or "not converged: N of M k outside ..., worst k = ...".
std::string ConvergenceSummary(const ConvergenceEvidence& e);
// checkpoint,half,k,in_window,full_error,half_error,diff,diff_lo,diff_hi,allowed,within
void WriteConvergenceCsv(std::ostream& os, const std::vector<ConvergenceEvidence>& all);
// The per-k table, k in the window marked; for a terminal.
void PrintConvergence(std::ostream& os, const ConvergenceEvidence& e);

}  // namespace icl::learners
