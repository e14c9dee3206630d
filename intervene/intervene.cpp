// Interchange interventions along ridge-probe directions (intervene.hpp): the request, the
// edits and the run over layers and k.
#include "intervene/intervene.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/names.hpp"
#include "core/spec.hpp"
#include "data/prompt_io.hpp"
#include "data/targets.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "intervene/file_common.hpp"
#include "learners/arma_torch.hpp"
#include "learners/classical.hpp"
#include "probes/uncertainty.hpp"

namespace icl::intervene {

namespace {

// w_ols, w_ridge, the true w, or a learner target ("w_gd_0.05_3": a classical learner's weights,
// whose spec the probes file names).
bool IsWeightTarget(const std::string& t) {
  return t == "w_ols" || t == "w_ridge" || t == "w" || t.rfind("w_", 0) == 0;
}

double ParseValue(const std::string& text, const std::string& spec, const std::string& expected) {
  const auto v = core::ParseNumber(text);
  if (!v) throw core::InputError("intervene", "response", "'" + spec + "': " + expected);
  return *v;
}

// The edit of one (layer, k): the readout v = W^T h + b and, among the changes dh of h that
// move the reading by r (W^T dh = r), the one of least norm in a metric M:
//   dh = M W (W^T M W)^+ r.
// covariance (M = Sigma, the states' covariance): the least Mahalanobis norm, i.e. for
//   Gaussian states the shift of E[h | reading] -- the edit moves h along directions in which
//   states of real prompts vary, so that it stays where the model has seen states before;
// standardized (M = S^2, the probe's feature variances): the least norm in the probe's own
//   standardised coordinates, blind to correlations between units.
// Plain Euclidean norm is not offered: it puts the edit where a unit's scale is smallest (a
// unit holding a copy of the quantity divided by the prompt length is cheaper to move than the
// quantity itself), not where the quantity lives.
struct EditMap {
  arma::mat weights;  // p x m
  arma::vec intercept;
  arma::mat edit;  // p x m
  double r2 = 0;
};

EditMap MakeEditMap(const probes::ProbeResults& file, const std::string& target, int layer, int k,
                    std::size_t li, std::size_t ki, EditMetric metric, const arma::mat& cov) {
  const probes::RidgeReadout ro = probes::ReadRidgeReadout(file, target, layer, k);
  EditMap e;
  e.weights = ro.weights;
  e.intercept = ro.intercept;
  arma::mat mw;  // M W
  if (metric == EditMetric::kStandardized) {
    if (ro.feature_scale.is_empty())
      throw core::InputError("'" + file.path + "'", "",
                             "stores no feature scales of its ridge probes (written before "
                             "interventions existed): probe the activations again, or use "
                             "the covariance metric");
    if (ro.feature_scale.n_elem != e.weights.n_rows)
      throw core::InputError("'" + file.path + "'", "", "feature scales and weights disagree");
    mw = e.weights;
    mw.each_col() %= arma::square(ro.feature_scale);
  } else {
    if (cov.n_rows != e.weights.n_rows)
      throw core::InputError("'" + file.path + "'", "",
                             "the ridge probe reads " + std::to_string(e.weights.n_rows) +
                                 " hidden units but the model has " + std::to_string(cov.n_rows));
    mw = cov * e.weights;
  }
  // W^T M W overflows for a probe of absurd weights (a hostile or corrupt file): refused naming
  // the file and the probe, before the pseudo-inverse fails without saying why.
  const arma::mat gram = e.weights.t() * mw;
  arma::mat gram_pinv;
  if (!gram.is_finite() || !arma::pinv(gram_pinv, gram))
    throw core::InputError("'" + file.path + "'", "",
                           "the ridge probe of " + target + " at layer " + std::to_string(layer) +
                               ", k = " + std::to_string(k) + " has weights (largest |w| " +
                               std::to_string(arma::abs(e.weights).max()) +
                               ") whose edit map W^T M W is not finite: not a probe of this "
                               "model's states");
  e.edit = mw * gram_pinv;
  const arma::cube* r2 = file.Find(target, "ridge", "model", "r2");
  e.r2 = r2 ? (*r2)(0, ki, li) : NAN;
  return e;
}

// The target value after k examples (m entries).
arma::vec TargetValue(const std::string& target, const data::PromptSet& s, std::size_t j,
                      const data::PrefixTargets& t, const learners::LearnerRun* learner, int k) {
  if (learner) return learner->weights.col(k);  // column k: the weights after k examples
  if (target == "w") return s.w.col(j);
  if (target == "w_ols") return t.w_ols.col(k - 1);
  if (target == "w_ridge") return t.w_ridge.col(k - 1);
  return t.xty.col(k - 1);
}

// The algorithm's change of the prediction at x_q when its quantity changes by dv.
double PredictedChange(const Response& r, const arma::vec& xq, const arma::vec& dv,
                       const arma::mat& xtx) {
  switch (r.kind) {
    case Response::kWeights:
      return arma::dot(xq, dv);
    case Response::kGd:
      return 2.0 * r.value * arma::dot(xq, dv);
    case Response::kRidge:
      if (r.value > 0)
        return arma::dot(xq, arma::solve(xtx + r.value * arma::eye(xtx.n_rows, xtx.n_cols), dv,
                                         arma::solve_opts::likely_sympd));
      return arma::dot(xq, arma::pinv(xtx) * dv);
    case Response::kOls:
      return arma::dot(xq, arma::pinv(xtx) * dv);
  }
  return NAN;
}

// Slope through the origin, its bootstrap interval and the correlation.
void Summarise(InterventionCell& c, int replicates, std::uint64_t seed) {
  const arma::uword P = c.predicted.n_elem, C = c.observed.n_cols;
  c.slope.set_size(C);
  c.slope_lo.set_size(C);
  c.slope_hi.set_size(C);
  c.correlation.set_size(C);
  const arma::vec pp = arma::square(c.predicted);
  if (!(arma::accu(pp) > 0))
    throw std::runtime_error(
        fmt::format("at layer {}, k = {} every predicted change is zero (B's value equals the "
                    "probe's reading of A in every pair); there is nothing to measure",
                    c.layer, c.k));
  const probes::Bootstrap boot(P, 1, replicates, seed);
  const arma::vec den = boot.Mean(0, pp);
  for (arma::uword ci = 0; ci < C; ++ci) {
    const arma::vec o = c.observed.col(ci);
    const arma::vec op = o % c.predicted;
    c.slope(ci) = arma::accu(op) / arma::accu(pp);
    const probes::Interval iv = probes::PercentileInterval(boot.Mean(0, op) / den);
    c.slope_lo(ci) = iv.lo;
    c.slope_hi(ci) = iv.hi;
    // A constant series (an edit the prediction ignores entirely) has correlation 0, not NaN.
    const double so = arma::stddev(o), sp = arma::stddev(c.predicted);
    c.correlation(ci) = so > 0 && sp > 0 ? arma::as_scalar(arma::cor(o, c.predicted)) : 0.0;
  }
}

}  // namespace

Response ParseResponse(const std::string& target, const std::string& spec) {
  Response r;
  if (IsWeightTarget(target)) {
    if (!spec.empty() && spec != "weights")
      throw core::InputError("intervene", "response",
                             "'" + spec + "': the weight target '" + target +
                                 "' predicts x_q^T w; its response is 'weights'");
    r.kind = Response::kWeights;
    r.name = "weights";
    return r;
  }
  if (target != "xty")
    throw core::InputError("intervene", "target",
                           "'" + target.substr(0, 80) +
                               "': expected w_ols, w_ridge, w, xty or a learner target w_<spec>");
  const std::string s = spec.empty() ? "ols" : spec;
  const std::string expected = "expected ols, ridge:LAMBDA (LAMBDA >= 0) or gd:ALPHA (ALPHA > 0)";
  r.name = s;
  if (s == "ols") {
    r.kind = Response::kOls;
  } else if (s.rfind("gd:", 0) == 0) {
    r.kind = Response::kGd;
    r.value = ParseValue(s.substr(3), s, expected);
    if (!(r.value > 0)) throw core::InputError("intervene", "response", "'" + s + "': " + expected);
  } else if (s.rfind("ridge:", 0) == 0) {
    r.kind = Response::kRidge;
    r.value = ParseValue(s.substr(6), s, expected);
    if (!(r.value >= 0))
      throw core::InputError("intervene", "response", "'" + s + "': " + expected);
  } else {
    throw core::InputError("intervene", "response", "'" + s.substr(0, 80) + "': " + expected);
  }
  return r;
}

std::string EditMetricName(EditMetric metric) {
  return metric == EditMetric::kCovariance ? "covariance" : "standardized";
}

std::string EditSpanName(EditSpan span) {
  return span == EditSpan::kProbed ? "probed" : "through-query";
}

EditMetric ParseEditMetric(const std::string& name) {
  for (const EditMetric m : {EditMetric::kCovariance, EditMetric::kStandardized})
    if (EditMetricName(m) == name) return m;
  throw core::InputError("intervene", "metric",
                         "expected covariance or standardized, got '" + name.substr(0, 40) + "'");
}

EditSpan ParseEditSpan(const std::string& name) {
  for (const EditSpan s : {EditSpan::kProbed, EditSpan::kThroughQuery})
    if (EditSpanName(s) == name) return s;
  throw core::InputError("intervene", "span",
                         "expected probed or through-query, got '" + name.substr(0, 40) + "'");
}

void InterveneRequest::Validate() const {
  if (pairs < 2 || pairs > 1000000)
    throw core::InputError("intervene", "pairs",
                           "must be in 2..1000000, got " + std::to_string(pairs));
  if (bootstrap < 1 || bootstrap > 1000000)
    throw core::InputError("intervene", "bootstrap", "replicates must be in 1..1000000");
  if (batch < 1) throw core::InputError("intervene", "batch", "must be positive");
  if (calibration_prompts < 2 || calibration_prompts > 10000000)
    throw core::InputError("intervene", "calibration_prompts", "must be in 2..10000000");
  ParseResponse(target, response);
  if (!within.empty()) {
    if (metric != EditMetric::kCovariance)
      throw core::InputError("intervene", "within",
                             "a probe within a subspace edits in the covariance of its "
                             "coordinates; the standardized metric does not apply");
    if (within_name.empty())
      throw core::InputError("intervene", "within", "the subspace needs a name");
    if (!within.is_finite() || within.n_cols < 1 || within.n_cols > within.n_rows ||
        arma::norm(within.t() * within - arma::eye(within.n_cols, within.n_cols), "inf") > 1e-6)
      throw core::InputError("intervene", "within",
                             "expected orthonormal columns (H x r, 1 <= r <= H)");
  }
}

namespace {

// The probes file against the model and the request: the same checkpoint, prompts the model
// reads, the target's ridge probes, and the layers and k to edit (the file's by default).
void ResolveCells(InterveneResult& res, const learners::ModelConfig& mc,
                  const probes::ProbeResults& probes) {
  const InterveneRequest& request = res.request;
  const std::string where = "'" + probes.path + "'";
  const std::string& checkpoint_sha256 = res.checkpoint_sha256;
  if (probes.checkpoint_sha256 != checkpoint_sha256)
    throw core::InputError(
        where, "",
        "was fitted on activations of the checkpoint with SHA-256 " +
            (probes.checkpoint_sha256.empty() ? std::string("(none recorded)")
                                              : probes.checkpoint_sha256.substr(0, 12) + "...") +
            ", not this checkpoint (" + checkpoint_sha256.substr(0, 12) +
            "...): probe this checkpoint's own activations");
  res.task = data::TaskConfig::FromJson(probes.task_config, where + " task_config");
  data::TaskConfig& task = res.task;
  if (mc.d != task.d || mc.n_max < task.n)
    throw core::InputError(where, "",
                           "describes prompts of d=" + std::to_string(task.d) +
                               ", n=" + std::to_string(task.n) +
                               " that the checkpoint's model (d=" + std::to_string(mc.d) +
                               ", n_max=" + std::to_string(mc.n_max) + ") cannot read");
  const std::string& target = request.target;
  if (probes::SplitTargetName(target).second == probes::ProbeAt::kQuery)
    throw core::InputError(where, "",
                           "target '" + target.substr(0, 80) +
                               "' was probed at the query token; interventions edit the state "
                               "after k examples: use a probe of '" +
                               probes::SplitTargetName(target).first.substr(0, 80) +
                               "' at the state");
  if (std::find(probes.targets.begin(), probes.targets.end(), target) == probes.targets.end())
    throw core::InputError(where, "", "has no probes of target '" + target + "'");
  if (!probes.Find(target, "ridge", "model", "r2"))
    throw core::InputError(
        where, "",
        "has no ridge probe of '" + target + "' (interventions need the ridge probe's linear map)");
  if (target != "w_ols" && target != "w_ridge" && target != "w" && target.rfind("w_", 0) == 0) {
    const auto it = probes.learner_targets.find(target);
    if (it == probes.learner_targets.end())
      throw core::InputError(where, "",
                             "does not name the learner of target '" + target.substr(0, 80) +
                                 "' (its activations have no such learner target)");
    res.target_learner = it->second;
  }
  const double target_lambda = probes.ridge_lambda;
  if (target == "w_ridge" && !(target_lambda >= 0))
    throw core::InputError(where, "", "does not record the lambda of its w_ridge target");
  res.layers = request.layers.empty() ? probes.layers : request.layers;
  for (const int l : res.layers) {
    if (std::find(probes.layers.begin(), probes.layers.end(), l) == probes.layers.end())
      throw core::InputError(where, "", "has no probes of layer " + std::to_string(l));
    if (l > mc.layers)
      throw core::InputError(where, "",
                             "lists layer " + std::to_string(l) +
                                 " but the checkpoint's model has states 0.." +
                                 std::to_string(mc.layers));
  }
  if (request.ks.empty()) {
    for (const int k : probes.ks)
      if (k < task.n) res.ks.push_back(k);
    if (res.ks.empty())
      throw core::InputError(where, "",
                             "has probes only at k = n; an intervention needs a "
                             "query after k examples (k <= n - 1)");
  } else {
    res.ks = request.ks;
  }
  for (const int k : res.ks) {
    if (std::find(probes.ks.begin(), probes.ks.end(), k) == probes.ks.end())
      throw core::InputError(where, "", "has no probes at k = " + std::to_string(k));
    if (k >= task.n)
      throw core::InputError("intervene", "k",
                             std::to_string(k) + " leaves no query (the prompts have n = " +
                                 std::to_string(task.n) + " examples; k must be <= n - 1)");
  }
  for (const auto* list : {&res.layers, &res.ks})
    if (std::set<int>(list->begin(), list->end()).size() != list->size())
      throw core::InputError("intervene", list == &res.layers ? "layers" : "k",
                             "an entry is listed twice");
  if (mc.hidden != 0 && !probes.model_config.empty() &&
      learners::ModelConfig::FromJson(probes.model_config, where + " model_config").hidden !=
          mc.hidden)
    throw core::InputError(
        where, "",
        "was fitted on states of width other than the model's " + std::to_string(mc.hidden));
}

// What the calibration prompts give each (layer, k): the states' covariance (the covariance
// metric) and, for a probe within a subspace, its coordinates Z = P^T h and the target T.
struct Calibration {
  std::vector<arma::mat> cov;   // H x H per cell
  std::vector<arma::mat> z, t;  // r x N and m x N per cell (within only)
};

// The calibration prompts are their own stream (disjoint from the pairs' prompts).
Calibration Calibrate(learners::Transformer& model, const InterveneResult& res,
                      double target_lambda) {
  const InterveneRequest& request = res.request;
  const data::TaskConfig& task = res.task;
  const learners::ModelConfig& mc = model->config;
  const std::size_t L = res.layers.size(), K = res.ks.size();
  const bool within = !request.within.empty();
  const arma::uword N = request.calibration_prompts;
  Calibration cal;
  cal.cov.resize(L * K);
  if (request.metric != EditMetric::kCovariance) return cal;
  if (within) {
    cal.z.assign(L * K, arma::mat(request.within.n_cols, N));
    cal.t.resize(L * K);
  }
  std::vector<arma::vec> sum(L * K, arma::zeros<arma::vec>(mc.hidden));
  std::vector<arma::mat> sum2(L * K, arma::zeros<arma::mat>(mc.hidden, mc.hidden));
  const std::uint64_t stream = request.seed ^ 0xc0ffee5eedULL;
  const auto learner =
      res.target_learner.empty() ? nullptr : learners::MakeLearner(res.target_learner, task);
  for (int first = 0; first < request.calibration_prompts; first += request.batch) {
    const int cnt = std::min(request.batch, request.calibration_prompts - first);
    const data::PromptSet set = data::SamplePrompts(task, stream, first, cnt);
    learners::ForwardOptions fo;
    fo.hidden_states = true;
    const learners::ForwardResult run = model->Run(data::TokenTensor(set, 0, cnt), fo);
    std::vector<data::PrefixTargets> targets(within ? cnt : 0);
    std::vector<learners::LearnerRun> runs(within && learner ? cnt : 0);
    for (std::size_t j = 0; j < targets.size(); ++j) {
      data::ComputePrefixTargets(set.x.slice(j), set.y.col(j), std::max(target_lambda, 0.0),
                                 targets[j]);
      if (learner) learner->Run(set.x.slice(j), set.y.col(j), runs[j]);
    }
    for (std::size_t li = 0; li < L; ++li)
      for (std::size_t ki = 0; ki < K; ++ki) {
        const std::size_t i = li * K + ki;
        const int k = res.ks[ki];
        const arma::mat h = learners::StateAt(run.hidden[res.layers[li]], data::AfterKPos(k));
        sum[i] += arma::sum(h, 1);
        sum2[i] += h * h.t();
        if (!within) continue;
        cal.z[i].cols(first, first + cnt - 1) = request.within.t() * h;
        for (int j = 0; j < cnt; ++j) {
          const arma::vec v =
              TargetValue(request.target, set, j, targets[j], runs.empty() ? nullptr : &runs[j], k);
          if (cal.t[i].is_empty()) cal.t[i].set_size(v.n_elem, N);
          cal.t[i].col(first + j) = v;
        }
      }
  }
  const double n = request.calibration_prompts;
  for (std::size_t i = 0; i < L * K; ++i)
    cal.cov[i] = arma::symmatu((sum2[i] - sum[i] * sum[i].t() / n) / (n - 1));
  return cal;
}

// The probe within the subspace P (H x r) for one cell: v = W^T P^T h + b by least squares on
// the calibration prompts (in-sample R2, pooled over the target's entries: r + 1 parameters per
// entry over N >= 2 prompts); the edit of least norm in the coordinates' covariance
// Sigma_z = P^T Sigma P, dh = P Sigma_z W (W^T Sigma_z W)^+ r, so it never leaves P.
EditMap WithinEditMap(const arma::mat& p, const arma::mat& z, const arma::mat& t,
                      const arma::mat& cov) {
  const arma::mat a = arma::join_rows(z.t(), arma::ones(z.n_cols));  // N x (r + 1)
  const arma::mat coef = arma::pinv(a) * t.t();                      // (r + 1) x m
  const arma::mat w = coef.head_rows(z.n_rows);                      // r x m
  EditMap e;
  e.weights = p * w;
  e.intercept = coef.row(z.n_rows).t();
  const arma::mat sz = p.t() * cov * p;
  e.edit = p * (sz * w) * arma::pinv(w.t() * sz * w);
  const arma::mat resid = t.t() - a * coef;
  const arma::mat centred = t.each_col() - arma::mean(t, 1);
  const double sst = arma::accu(arma::square(centred));
  e.r2 = sst > 0 ? 1.0 - arma::accu(arma::square(resid)) / sst : NAN;
  return e;
}

// Per (layer, k): the probe's reading and edit direction, and the cell's result arrays.
std::vector<EditMap> PrepareEdits(InterveneResult& res, const learners::ModelConfig& mc,
                                  const probes::ProbeResults& probes, const Calibration& cal) {
  const std::vector<arma::mat>& cov = cal.cov;
  const InterveneRequest& request = res.request;
  const std::string& target = request.target;
  const std::string where = "'" + probes.path + "'";
  const std::size_t L = res.layers.size(), K = res.ks.size(), P = request.pairs;
  std::vector<EditMap> maps(L * K);
  res.cells.resize(L * K);
  for (std::size_t li = 0; li < L; ++li)
    for (std::size_t ki = 0; ki < K; ++ki) {
      const std::size_t pl = std::find(probes.layers.begin(), probes.layers.end(), res.layers[li]) -
                             probes.layers.begin();
      const std::size_t pk =
          std::find(probes.ks.begin(), probes.ks.end(), res.ks[ki]) - probes.ks.begin();
      EditMap& e = maps[li * K + ki];
      if (!request.within.empty())
        e = WithinEditMap(request.within, cal.z[li * K + ki], cal.t[li * K + ki], cov[li * K + ki]);
      else
        e = MakeEditMap(probes, target, res.layers[li], res.ks[ki], pl, pk, request.metric,
                        request.metric == EditMetric::kCovariance ? cov[li * K + ki] : arma::mat());
      if (e.weights.n_rows != arma::uword(mc.hidden))
        throw core::InputError(where, "",
                               "the ridge probe reads " + std::to_string(e.weights.n_rows) +
                                   " hidden units but the checkpoint's model has " +
                                   std::to_string(mc.hidden));
      // A probe of zero weights reads nothing: no edit can move its reading, and every slope
      // would be a 0 [0, 0] that looks like "not used" for edits never made.
      if (!e.weights.is_finite() || !e.edit.is_finite() || arma::norm(e.weights, "inf") == 0 ||
          arma::norm(e.edit, "inf") == 0)
        throw core::InputError(
            where, "",
            fmt::format(
                "the ridge probe of {} at layer {}, k = {} has {} weights, so no edit along it "
                "can be made; probe that layer again",
                target, res.layers[li], res.ks[ki],
                e.weights.is_finite() ? "all-zero" : "non-finite"));
      InterventionCell& c = res.cells[li * K + ki];
      c.layer = res.layers[li];
      c.k = res.ks[ki];
      c.probe_r2 = e.r2;
      c.predicted.set_size(P);
      c.observed.set_size(P, kInterventionControls.size());
      c.edit_norm.set_size(P);
      c.state_norm.set_size(P);
    }

  return maps;
}

// One batch of pairs [first, first + cnt): A's state after k examples is edited so that the
// probe reads B's value (and along a random direction of the same norm), the rest of the
// network runs on the edited state, and the change of the prediction at A's query is kept
// beside the change the algorithm predicts.
void RunPairs(learners::Transformer& model, InterveneResult& res, const std::vector<EditMap>& maps,
              double target_lambda, std::size_t first,
              const std::function<void(long long)>& advance) {
  const InterveneRequest& request = res.request;
  const std::string& target = request.target;
  const data::TaskConfig& task = res.task;
  const std::size_t L = res.layers.size(), K = res.ks.size(), P = request.pairs;
  const int H = model->config.hidden;
  const std::size_t cnt = std::min<std::size_t>(request.batch, P - first);
  data::PromptSet a, b;
  SamplePairs(task, request.seed, first, cnt, a, b);
  std::vector<data::PrefixTargets> ta(cnt), tb(cnt);
  for (std::size_t j = 0; j < cnt; ++j) {
    data::ComputePrefixTargets(a.x.slice(j), a.y.col(j), std::max(target_lambda, 0.0), ta[j]);
    data::ComputePrefixTargets(b.x.slice(j), b.y.col(j), std::max(target_lambda, 0.0), tb[j]);
  }
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  std::vector<learners::LearnerRun> learner_b(res.target_learner.empty() ? 0 : cnt);
  if (!res.target_learner.empty()) {
    const auto learner = learners::MakeLearner(res.target_learner, task);
    for (std::size_t j = 0; j < cnt; ++j)
      learner->Run(b.x.slice(j), b.y.col(j), learner_b[j]);
  }
  const learners::ForwardResult run = model->Run(data::TokenTensor(a, 0, cnt), fo);
  const torch::Tensor base = run.predictions.contiguous();
  for (std::size_t li = 0; li < L; ++li) {
    const int layer = res.layers[li];
    const torch::Tensor& state = run.hidden[layer];
    for (std::size_t ki = 0; ki < K; ++ki) {
      const int k = res.ks[ki], pos = data::AfterKPos(k);
      const EditMap& e = maps[li * K + ki];
      InterventionCell& c = res.cells[li * K + ki];
      const arma::mat h = learners::StateAt(state, pos);  // H x cnt
      arma::mat reading = e.weights.t() * h;
      reading.each_col() += e.intercept;
      arma::mat r(reading.n_rows, cnt);
      for (std::size_t j = 0; j < cnt; ++j)
        r.col(j) =
            TargetValue(target, b, j, tb[j], learner_b.empty() ? nullptr : &learner_b[j], k) -
            reading.col(j);
      const arma::mat dh = e.edit * r;  // H x cnt
      arma::mat random(H, cnt);
      for (std::size_t j = 0; j < cnt; ++j) {
        const std::size_t p = first + j;
        // x_q = x_{k+1} of prompt A: column k of its examples.
        const arma::vec xq = a.x.slice(j).col(k);
        c.predicted(p) = PredictedChange(res.response, xq, r.col(j), ta[j].xtx.slice(k - 1));
        c.edit_norm(p) = arma::norm(dh.col(j));
        c.state_norm(p) = arma::norm(h.col(j));
        // The random control: a direction drawn per (pair, layer, k), scaled to the edit's norm.
        data::Rng rng(request.seed ^ 0x9e3779b97f4a7c15ULL,
                      (std::uint64_t(layer) << 48) ^ (std::uint64_t(k) << 32) ^ p);
        arma::vec u(H);
        for (int i = 0; i < H; ++i)
          u(i) = rng.Normal();
        random.col(j) = u * (c.edit_norm(p) / std::max(arma::norm(u), 1e-300));
      }
      for (std::size_t ci = 0; ci < kInterventionControls.size(); ++ci) {
        const torch::Tensor edit =
            learners::ToTensor(arma::mat(ci == 0 ? dh : random).t());  // [cnt, H]
        torch::Tensor edited = state.clone();
        edited.select(/*dim=*/1, pos).add_(edit);
        if (request.span == EditSpan::kThroughQuery)
          edited.select(/*dim=*/1, data::XTokenPos(k)).add_(edit);
        const torch::Tensor pred = model->RunFrom(layer, edited).contiguous();
        const torch::Tensor change = (pred.select(1, k) - base.select(1, k)).contiguous();
        for (std::size_t j = 0; j < cnt; ++j)
          c.observed(first + j, ci) = change[j].item<float>();
      }
      advance(cnt);
    }
  }
}

}  // namespace

void SamplePairs(const data::TaskConfig& task, std::uint64_t seed, std::size_t first,
                 std::size_t count, data::PromptSet& a, data::PromptSet& b) {
  for (data::PromptSet* s : {&a, &b}) {
    s->task = task;
    s->seed = seed;
    s->first_index = 2 * first;
    s->x.set_size(task.d, task.n, count);
    s->y.set_size(task.n, count);
    s->w.set_size(task.d, count);
  }
  for (std::size_t j = 0; j < count; ++j)
    for (int side = 0; side < 2; ++side) {
      data::PromptSet& s = side == 0 ? a : b;
      data::SamplePrompt(task, seed, 2 * (first + j) + side, s.x.slice(j).memptr(), s.y.colptr(j),
                         s.w.colptr(j));
    }
}

InterveneResult RunIntervene(learners::Transformer model, const std::string& checkpoint_sha256,
                             const probes::ProbeResults& probes, const InterveneRequest& request,
                             const std::function<void(long long, long long)>& progress) {
  request.Validate();
  InterveneResult res;
  res.request = request;
  res.response = ParseResponse(request.target, request.response);
  res.checkpoint_sha256 = checkpoint_sha256;
  res.probes = probes.path;
  ResolveCells(res, model->config, probes);
  torch::NoGradGuard no_grad;
  model->eval();
  if (!request.within.empty() && request.within.n_rows != arma::uword(model->config.hidden))
    throw core::InputError("intervene", "within",
                           "the subspace has " + std::to_string(request.within.n_rows) +
                               " rows but the model's state has " +
                               std::to_string(model->config.hidden));
  const std::vector<EditMap> maps =
      PrepareEdits(res, model->config, probes, Calibrate(model, res, probes.ridge_lambda));
  const std::size_t P = request.pairs;
  const long long total = static_cast<long long>(P) * res.layers.size() * res.ks.size();
  long long done = 0;
  for (std::size_t first = 0; first < P; first += request.batch)
    RunPairs(model, res, maps, probes.ridge_lambda, first, [&](long long count) {
      done += count;
      if (progress) progress(done, total);
    });
  for (std::size_t i = 0; i < res.cells.size(); ++i)
    Summarise(res.cells[i], request.bootstrap, request.seed + 1 + i);
  return res;
}

}  // namespace icl::intervene
