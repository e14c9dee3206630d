// Interchange interventions along probe directions (iclprobe intervene): does the model *use*
// what a ridge probe reads? The hidden state of prompt A is edited so that the probe reads
// prompt B's value, the rest of the network runs on the edited state, and the change of the
// prediction at A's query is compared with the change the algorithm predicts. This file owns
// the interventions file: its writer and reader, through its schema
// (formats::InterventionsSchema()).
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
#include "probes/probes_file.hpp"

namespace icl::intervene {

inline constexpr const char* kInterventionsFormat = formats::kInterventionsFormat;

// How the algorithm turns a change dv of the probed quantity into a change of its prediction
// at the query x_q. Weight targets (w_ols, w_ridge, w) predict x_q^T w: dy = x_q^T dv. The
// moment vector X'y enters through the algorithm's formula, X the k examples of prompt A:
//   gd:ALPHA     one GD step from w = 0, w_1 = 2 alpha X'y  ->  dy = 2 alpha x_q^T dv
//   ridge:LAMBDA w = (X'X + lambda I)^-1 X'y                 ->  dy = x_q^T (X'X + lambda I)^-1 dv
//   ols          w = (X'X)^+ X'y                             ->  dy = x_q^T (X'X)^+ dv
struct Response {
  enum Kind { kWeights, kGd, kRidge, kOls } kind = kWeights;
  double value = 0;  // alpha or lambda
  std::string name;  // as given: "weights", "gd:0.05", "ridge:0.1", "ols"
};
// Parses `spec` for `target` ("" = the default: weights for weight targets, ols for xty);
// throws core::InputError (setting "response" or "target") saying what was expected.
Response ParseResponse(const std::string& target, const std::string& spec);

// Where the edit is added: the state the probe reads (the y-token of example k), or every
// position from there to the query (the y-token of example k and the x-token of example k+1).
enum class EditSpan { kProbed, kThroughQuery };
std::string EditSpanName(EditSpan span);  // "probed", "through-query"
// EditSpanName's inverse; core::InputError (setting "span") for any other name.
EditSpan ParseEditSpan(const std::string& name);

// The norm in which the edit is smallest (see intervene.cpp): the states' covariance over
// calibration prompts (Mahalanobis: the edit follows how states of real prompts vary), or the
// probe's own feature standardisation (diagonal).
enum class EditMetric { kCovariance, kStandardized };
std::string EditMetricName(EditMetric metric);  // "covariance", "standardized"
// EditMetricName's inverse; core::InputError (setting "metric") for any other name.
EditMetric ParseEditMetric(const std::string& name);

struct InterveneRequest {
  std::string target = "w_ols";  // w_ols, w_ridge, w, xty or a learner target w_<spec>
  std::vector<int> layers;       // states 0..L; empty: every layer of the probes file
  std::vector<int> ks;           // each in 1..n-1 (the query x_{k+1} must exist)
  int pairs = 1000;              // pair p is prompts (2p, 2p+1) of the stream `seed`
  std::uint64_t seed = 11;
  EditSpan span = EditSpan::kProbed;
  EditMetric metric = EditMetric::kCovariance;
  int calibration_prompts = 2000;  // for the covariance metric; their own seeded stream
  std::string response;            // see ParseResponse
  int bootstrap = 1000;            // replicates of the bootstrap over pairs
  int batch = 256;                 // pairs per forward pass
  // When not empty (H x r, orthonormal columns): the probe is fitted on the state's coordinates
  // in this subspace alone (least squares with an intercept over the calibration prompts, each
  // (layer, k) on its own), instead of the probes file's ridge probe, and the edit stays inside
  // the subspace (the least norm in the covariance of those coordinates). A probe of the whole
  // state reads every copy of a quantity, and its covariance-metric edit moves every copy: a
  // construction's decoy rows are tested this way. Needs the covariance metric.
  arma::mat within;
  std::string within_name;  // what the subspace is, for the file ("decoy_xty")
  void Validate() const;
};

// The controls every cell is run with: the probe's own edit, and an edit of the same norm in a
// random direction (seeded per pair, layer and k).
inline const std::vector<std::string> kInterventionControls = {"probe", "random"};

// One (layer, k): per pair, the predicted and the observed change of the prediction, and the
// summaries of observed on predicted per control.
struct InterventionCell {
  int layer = 0, k = 0;
  double probe_r2 = 0;   // the probe's test R2 (mean over probe seeds) from the probes file
  arma::vec predicted;   // per pair: the algorithm's response to the edit's change of the reading
  arma::mat observed;    // pairs x controls: change of the model's prediction at the query
  arma::vec edit_norm;   // per pair: |dh|
  arma::vec state_norm;  // per pair: |h| of the edited state (before the edit)
  // Per control: slope of observed on predicted through the origin (sum o p / sum p^2; 1 = the
  // model responds as the algorithm would, 0 = not at all) with its 95% percentile bootstrap
  // interval over pairs, and the correlation of the two.
  arma::vec slope, slope_lo, slope_hi, correlation;
};

struct InterveneResult {
  InterveneRequest request;
  Response response;
  data::TaskConfig task;
  std::string checkpoint, checkpoint_sha256, probes, probes_digest;
  std::vector<int> layers, ks;
  std::vector<InterventionCell> cells;  // layer-major: cells[li * K + ki]
  std::string target_learner;  // a learner target's spec (its weights are the target), or ""
  const InterventionCell& Cell(std::size_t li, std::size_t ki) const {
    return cells.at(li * ks.size() + ki);
  }
};

// The prompt pairs [first, first + count) of the stream `seed` of `task`: pair p is A = prompt
// 2p (into a) and B = prompt 2p + 1 (into b); the pairs of intervene and swap.
void SamplePairs(const data::TaskConfig& task, std::uint64_t seed, std::size_t first,
                 std::size_t count, data::PromptSet& a, data::PromptSet& b);

// Checks the request against the probes file and the model before any work, then runs it.
// `checkpoint_sha256` is the SHA-256 of the checkpoint file `model` was loaded from: it must be
// the one the probes' activations were extracted from. Throws core::InputError naming the
// file and what is wrong (another checkpoint, a target / layer / k / probe family the probes
// file lacks, a probes file without feature scales).
InterveneResult RunIntervene(
    learners::Transformer model, const std::string& checkpoint_sha256,
    const probes::ProbeResults& probes, const InterveneRequest& request,
    const std::function<void(long long done, long long total)>& progress = {});

// The file: root attributes (format, created_by, checkpoint, checkpoint_sha256, probes,
// target, response, span, metric, calibration_prompts, seed, pairs, bootstrap, task_config, layers,
// ks, controls) and
//   /slope, /slope_lo, /slope_hi, /correlation   [control, layer, k]
//   /probe_r2                                     [layer, k]
//   /predicted, /edit_norm, /state_norm           [layer, k, pair]
//   /observed                                     [control, layer, k, pair]
void WriteInterventionsFile(const std::string& path, const InterveneResult& result);
// Reads and checks one (shapes as the attributes say, names plain, every value finite).
InterveneResult ReadInterventionsFile(const std::string& path);
// The tidy CSV: target,response,span,metric,layer,k,control,pairs,slope,slope_lo,slope_hi,
// correlation,probe_r2,mean_abs_predicted,mean_abs_observed,median_edit_rel.
void WriteInterventionsCsv(std::ostream& os, const InterveneResult& result);
// A short table on stdout: per k, the slopes by layer with intervals.
void PrintInterventionSummary(std::ostream& os, const InterveneResult& result);

}  // namespace icl::intervene
