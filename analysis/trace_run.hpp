// The trace stage: the learners of one cell (and their controls) read out at every
// layer on the same prompts, matched to each algorithm's iterates; what `iclprobe trace` runs
// and analysis/trace_file.hpp stores.
#pragma once

#include <armadillo>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/trace.hpp"
#include "extract/activations.hpp"
#include "learners/transformer.hpp"

namespace icl::analysis {

struct TraceRequest {
  std::vector<std::string> algorithms;  // specs, ParseTraceAlgorithm's forms; at least one
  std::vector<int> ks;                  // prompt lengths (0..n-1); empty: 1..n-1
  std::vector<int> layers;              // states (0 = embedding .. L); empty: every one
  Readout readout = Readout::kRidge;
  int prompts = 2000;                             // scored prompts
  int fit_prompts = 4000;                         // the ridge readout's (after the scored ones)
  std::uint64_t seed = 0;                         // the prompts' seed (without activations files)
  arma::vec lambdas = arma::logspace(-4, 4, 17);  // the ridge readout's grid
  int bootstrap = 1000;                           // replicates of the two-stage bootstrap
  double level = 0.95;
  int batch = 256;  // prompts per read of the states
  int threads = 1;  // workers of the forward pass (extract's groups; torch and BLAS kept serial)
  // Throws core::InputError naming the setting.
  void Validate() const;
};

// The default algorithms for a task of dimension d and n examples: Newton (Fu et al.'s
// iteration, 16 steps), GD with half the step at which a prompt of k = n-1 examples whose X^T X
// reaches the Marchenko-Pastur edge (sqrt(n-1) + sqrt(d))^2 diverges (alpha = 0.5 / edge, stable
// on essentially every prompt) for 256 steps, and the ridge path from lambda = 1e3 to 1e-4 in 29
// steps.
std::vector<std::string> DefaultTraceAlgorithms(const data::TaskConfig& task);

// One learner (or control) as the stage gets it: its checkpoint (loaded) and, optionally, the
// activations extract wrote from it, whose states are then read instead of a forward pass.
struct TraceInput {
  std::string name, checkpoint, sha256;  // sha256 of the checkpoint file
  std::uint64_t train_seed = 0;
  learners::Transformer model{nullptr};
  std::string activations;  // "" when the states come from a forward pass
  std::optional<extract::ActivationsInfo> info;
};

struct AlgorithmTrace {
  TraceAlgorithm algorithm;
  IterateMatch model, control;  // control: empty matrices when no control was traced
};

struct TraceResult {
  TraceRequest request;   // with ks, layers and algorithms resolved
  data::TaskConfig task;  // the prompts' task
  std::uint64_t prompt_seed = 0;
  std::string prompts_from;  // "" (sampled) or the activations file whose rows were scored
  std::vector<TraceInput> learners, controls;                // models released after the run
  arma::mat labels;                                          // K x N: y_{k+1}
  std::vector<arma::cube> predictions, control_predictions;  // per input [K, N, layers]
  std::vector<AlgorithmTrace> algorithms;
  int model_layers = 0;  // L of the learners
  bool HasControls() const { return !controls.empty(); }
};

// Checks that the inputs go together (one task, the activations files belong to their
// checkpoints and hold the same prompts, the states and rows asked for) before any work, and
// returns the prompts: the first activations file's rows or the seeded stream. Throws
// core::InputError naming the file and the setting.
struct TracePrompts {
  data::PromptSet fit, eval;
  std::string from;  // the activations file, or ""
};
TracePrompts PrepareTrace(TraceRequest& req, const data::TaskConfig& task,
                          const std::vector<TraceInput>& learners,
                          const std::vector<TraceInput>& controls);

// Runs the trace. `progress(done, total)` hears of prompts read (every learner's and control's
// fit passes and scored prompts).
// The forward passes run on the caller's `pool` (apps/ makes it of req.threads workers).
TraceResult RunTrace(const TraceRequest& req, const TracePrompts& prompts,
                     std::vector<TraceInput> learners, std::vector<TraceInput> controls,
                     core::ThreadPool& pool,
                     const std::function<void(long long, long long)>& progress = {});

}  // namespace icl::analysis
