// Which iterate at which layer: a learner's prediction read out of every layer,
// matched to the iterates of GD, Newton and the ridge path (Fu et al. 2023's comparison), with
// bootstrap intervals over prompts and over the seeds of a cell.
#pragma once

#include <armadillo>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "data/task.hpp"
#include "extract/activations.hpp"
#include "learners/classical.hpp"
#include "learners/transformer.hpp"

namespace icl::analysis {

// An algorithm whose iterates t = 0..T the layers are matched to. Iterate 0 predicts 0 (w_0 = 0)
// for every family.
//   gd:ALPHA:T             batch GD from 0, w_t = w_{t-1} - 2 ALPHA (X^T X w_{t-1} - X^T y)
//   sgd:ALPHA:T            SGD (batch 1, the k examples in order) from 0; iterate t is the
//                          weights after t passes (pass 1: docs/paper.md's one-pass SGD)
//   newton:T[:C[:LAMBDA]]  Newton-Schulz iterates (learners/classical.hpp's newton)
//   ridge-path:HI:LO:T     ridge with lambda from HI down to LO, T values log-spaced (iterate t
//                          is the t-th lambda)
struct TraceAlgorithm {
  std::string spec, family;     // family: "gd", "sgd", "newton" or "ridge-path"
  int steps = 0;                // T
  double alpha = 0;             // sgd: the step size
  std::vector<double> lambdas;  // ridge-path: the T penalties, large to small
  std::shared_ptr<const learners::ClassicalLearner> learner;  // gd, newton
};
constexpr int kMaxTraceIterates = 4096;
// Parses one spec; throws core::InputError (setting "algorithms") naming what was expected.
TraceAlgorithm ParseTraceAlgorithm(const std::string& spec, const data::TaskConfig& task);

// The predictions of iterates 0..T of y_{k+1} from the first k examples, for k in `ks` (each in
// 0..n-1): cube [ks, prompts, T + 1] (entry (j, i, t): prompt i, k = ks[j], iterate t).
arma::cube IteratePredictions(const TraceAlgorithm& a, const data::PromptSet& set,
                              const std::vector<int>& ks);

// How a layer's state becomes a prediction of y_{k+1}, read at the x-token of example k+1:
//   lens:  the model's own final LayerNorm and readout applied to state l (the "logit lens");
//   ridge: a ridge readout per layer (features standardised, intercept, lambda by exact
//          leave-one-out), fitted to the labels y_{k+1} on the `fit` prompts with every k in
//          `ks` pooled, as Fu et al. retrain a readout per layer.
enum class Readout { kLens, kRidge };
Readout ParseReadout(const std::string& name);  // "lens" or "ridge"; core::InputError otherwise
const char* ReadoutName(Readout r);

// Where the traced states come from: for prompts [begin, begin + count) of the fit prompts
// (fit = true) or of the scored ones, each traced layer's state at the x-tokens of examples
// k + 1 (k in ks), per layer a float32 tensor [count, K, H].
using QueryStates =
    std::function<std::vector<torch::Tensor>(bool fit, std::size_t begin, std::size_t count)>;
// From a forward pass of `model` (kept by reference) over `fit` and `eval`; `layers`: the state
// indices (0 = embedding .. L). The prompts are run as one stream, the scored rows then the fit
// rows, in extract's groups (extract::RunGroup) on the caller's `pool` (which must outlive the
// returned function; none: the calling thread alone): with torch's and OpenBLAS's own pools
// serial (the caller's setting, as extract's), each state equals, bit for bit, the one an
// activations file of the same stream holds (FileStates).
QueryStates ModelStates(learners::Transformer& model, const data::PromptSet& fit,
                        const data::PromptSet& eval, const std::vector<int>& ks,
                        const std::vector<int>& layers, core::ThreadPool* pool = nullptr);
// From an activations file that stores every position (extract's default): the scored prompts
// are its rows [0, eval_rows), the fit prompts the rows after them. The file must hold `layers`
// (core::InputError, setting "layers", naming the file otherwise).
QueryStates FileStates(const extract::ActivationsInfo& info, std::size_t eval_rows,
                       const std::vector<int>& ks, const std::vector<int>& layers);

// Predictions of the traced layers on the scored prompts: cube [K, eval_prompts, layers].
// `lens` (for Readout::kLens) supplies the final LayerNorm and readout; `fit_labels` (K x fit
// prompts, TraceLabels of the fit prompts) the ridge readout's labels. States are read in
// batches of `batch` prompts; `on_prompts` (may be empty) hears of each batch read (prompts).
arma::cube LayerPredictions(const QueryStates& states, int layers, learners::Transformer* lens,
                            const arma::mat& fit_labels, std::size_t eval_prompts, Readout readout,
                            const arma::vec& lambdas, int batch = 256,
                            const std::function<void(std::size_t)>& on_prompts = {});
// The same from a forward pass of `model` over every state (embedding, then after each block):
// cube [ks, eval prompts, L + 1]. `fit` is used by the ridge readout only.
arma::cube LayerPredictions(learners::Transformer& model, const data::PromptSet& fit,
                            const data::PromptSet& eval, const std::vector<int>& ks,
                            Readout readout, const arma::vec& lambdas, int batch = 256);

// The match of L + 1 layers with T + 1 iterates, pooled over the seeds (learners) given:
//   spd:  1 - sum (a - b)^2 / sum (a^2 + b^2 + 1e-6 y^2) over prompts and k: 1 when the
//         layer's predictions a equal the iterate's b, about 0 when one is zero and the other
//         is not, -1 when b = -a (SPD-based; the 1e-6 y^2 makes two predictions that both stay
//         under 1e-3 of the labels' rms, float32 rounding of zero, count as equal);
//   cos:  Fu et al.'s residual similarity, the mean over prompts of the cosine between the
//         vectors over k of a - y and b - y (a prompt whose residuals are both zero counts 1);
// each with a two-stage (seeds, then prompts) percentile bootstrap interval.
struct IterateMatch {
  arma::mat spd, spd_lo, spd_hi;  // [L + 1, T + 1]
  arma::mat cos, cos_lo, cos_hi;
  // Per layer: the iterate of highest spd similarity (the first of ties), its interval over
  // replicates (each replicate's own best), and the paired margin of the point estimate's best
  // over the better of its two neighbours (one iterate away), with its interval.
  arma::vec best, best_lo, best_hi;
  arma::vec margin, margin_lo, margin_hi;  // NaN where the best has no neighbour
  // Per layer: the best iterate's spd similarity (the maximum over iterates), with its interval
  // (each replicate's own maximum).
  arma::vec best_spd, best_spd_lo, best_spd_hi;
  // With controls (MatchWithControls): per layer the paired excess of the best spd similarity
  // to an iterate t >= 1 (one that has computed something; iterate 0 predicts 0) over the
  // control's, with its interval; empty otherwise.
  arma::vec excess, excess_lo, excess_hi;
  // Iterations per layer: the least-squares slope of the best iterate over the layers whose
  // best iterate lies strictly inside 1..T-1 (not 0: nothing computed yet; not T: converged or
  // beyond the range), and doublings per layer, the same slope of log2 of the best iterate; NaN
  // with fewer than two such layers. A method that adds a fixed number of iterations per layer
  // has a constant rate; GD matched to a second-order method (Newton iterate t = GD iterate 2^t)
  // has a constant log2_rate instead.
  double rate = NAN, rate_lo = NAN, rate_hi = NAN;
  double log2_rate = NAN, log2_rate_lo = NAN, log2_rate_hi = NAN;
  int rate_layers = 0;
};

// layers: one cube [K, N, L + 1] per seed (LayerPredictions on the same prompts); iterates
// [K, N, T + 1]; labels K x N (y_{k+1}). Intervals at `level` from `replicates` resamples.
// layer_ids: the state index of each slice (the rate's abscissa; default 0, 1, ...).
IterateMatch MatchIterates(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                           const arma::mat& labels, int replicates = 1000, std::uint64_t seed = 0,
                           double level = 0.95, const std::vector<int>& layer_ids = {});

// The learners' match and their controls' (random-init twins: one per seed, paired in order, or
// one for every seed) on the same bootstrap resamples of seeds and prompts, so that
// model.excess, the margin of the model's best similarity per layer over its control's, is
// paired. Every cube has the shape of layers[0].
struct TracedPair {
  IterateMatch model, control;
};
TracedPair MatchWithControls(const std::vector<arma::cube>& layers,
                             const std::vector<arma::cube>& controls, const arma::cube& iterates,
                             const arma::mat& labels, int replicates = 1000, std::uint64_t seed = 0,
                             double level = 0.95, const std::vector<int>& layer_ids = {});

// The labels y_{k+1} of `set` for k in ks: K x N.
arma::mat TraceLabels(const data::PromptSet& set, const std::vector<int>& ks);

}  // namespace icl::analysis
