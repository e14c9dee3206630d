// Whole-context counterfactuals (iclprobe swap): prompt A's query runs on prompt B's context
// state at layer l, and the change of the prediction is compared with each algorithm's change on
// the prompt that counterfactual stands for (B's first k examples, then A's query x_{k+1}) — a
// prompt every algorithm defines, at every layer. This file owns the swaps file: its
// writer and reader, through its schema (formats::SwapsSchema()).
#pragma once

#include <armadillo>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "formats/schemas.hpp"
#include "learners/transformer.hpp"

namespace icl::intervene {

inline constexpr const char* kSwapsFormat = formats::kSwapsFormat;
// The first reference of every swaps file: the model itself on the counterfactual prompt (the
// swap at the embedding, state 0, is that prompt exactly).
inline constexpr const char* kModelReference = "model";

struct SwapRequest {
  // Classical learners (learners/classical.hpp specs), compared after the model itself.
  std::string learners = "ols,ridge:0.1,gd:0.1";
  std::vector<int> layers;  // states 0..L; empty: all
  std::vector<int> ks;      // each in 1..n-1 (the query x_{k+1} must exist); empty: all
  int pairs = 1000;         // pair p is prompts (2p, 2p+1) of the stream `seed`
  std::uint64_t seed = 11;
  int bootstrap = 1000;  // replicates of the bootstrap over pairs
  int batch = 256;       // pairs per forward pass
  void Validate() const;
};

// For a pair (A, B), layer l and k: the model's change dm = f(A's state at l with positions
// 0..2k-1, the first k examples, replaced by B's) - f(A), read at A's x_{k+1} (position 2k); an
// algorithm's change da = alg(B's first k examples; A's x_{k+1}) - alg(A's first k; A's x_{k+1}).
// Per (reference, layer, k), over pairs:
//   reproduced = 1 - sum (dm - da)^2 / sum (da - mean da)^2: the share of the algorithm's
//       counterfactual change the model reproduces (1: all of it, 0: none, as when the model
//       ignores the swapped context; below 0: further from the algorithm than ignoring it);
//   slope = sum dm da / sum da^2 (through the origin), and the correlation of dm and da;
// 95% percentile bootstrap intervals over pairs. Pooled over the k of the run: the same with
// the sums over pairs and k (pairs resampled with all their k), so that no summary rests on one k.
// An interval is undefined (NaN) when a resample has no spread in da (few pairs: a resample that
// drew one pair only), file_common.hpp's SpreadRatio.
struct SwapResult {
  SwapRequest request;
  data::TaskConfig task;
  std::string checkpoint, checkpoint_sha256;
  std::vector<std::string> references;  // "model", then the algorithms' specs
  std::vector<int> layers, ks;
  arma::cube model_change;      // [pair, k, layer] (Armadillo: rows pairs, cols ks, slices layers)
  arma::cube reference_change;  // [pair, k, reference]
  // [reference, layer, k] as cubes of rows references, cols layers, slices ks.
  arma::cube reproduced, reproduced_lo, reproduced_hi, slope, slope_lo, slope_hi, correlation;
  // Pooled over k: references x layers.
  arma::mat pooled_reproduced, pooled_reproduced_lo, pooled_reproduced_hi, pooled_slope,
      pooled_slope_lo, pooled_slope_hi;
};

// Checks the request against the model before any work (a layer or k the model lacks, an
// algorithm spec that does not parse; throws core::InputError naming the setting), then runs it
// on pairs of `task` (the checkpoint's task).
SwapResult RunSwap(learners::Transformer model, const std::string& checkpoint_sha256,
                   const data::TaskConfig& task, const SwapRequest& request,
                   const std::function<void(long long done, long long total)>& progress = {});

// The file: root attributes (format, created_by, checkpoint, checkpoint_sha256, seed, pairs,
// bootstrap_replicates, task_config, layers, ks, references, rules) and
//   /reproduced, /reproduced_lo, /reproduced_hi, /slope, /slope_lo, /slope_hi, /correlation
//                                                  [reference, layer, k]
//   /pooled_reproduced(_lo, _hi), /pooled_slope(_lo, _hi)   [reference, layer]
//   /model_change [layer, k, pair], /reference_change [reference, k, pair]
// The bounds (*_lo, *_hi) may be NaN, undefined, as their attribute 'undefined' says; every
// other value is finite.
void WriteSwapsFile(const std::string& path, const SwapResult& result);
// Reads and checks one (shapes as the attributes say, names plain, every value finite but the
// undefined bounds).
SwapResult ReadSwapsFile(const std::string& path);
// The tidy CSV: reference,layer,k,pairs,reproduced,reproduced_lo,reproduced_hi,slope,slope_lo,
// slope_hi,correlation,mean_abs_model_change,mean_abs_reference_change; k = "pooled" rows hold
// the summaries over every k. An undefined bound is an empty cell.
void WriteSwapsCsv(std::ostream& os, const SwapResult& result);
// A short table on stdout: per reference, the pooled share reproduced by layer with intervals
// ("undefined" where they are).
void PrintSwapSummary(std::ostream& os, const SwapResult& result);

}  // namespace icl::intervene
