// Per-layer predictions matched to algorithm iterates (trace.hpp): SPD and residual cosine per
// layer and iterate with bootstrap intervals, and which iterates each layer is similar to.
#include "analysis/trace.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "probes/uncertainty.hpp"

namespace icl::analysis {

namespace {

// The spd similarity's denominator gets kSpdFloor times the labels' energy: two predictions
// that both stay below 1e-3 of the labels' rms (a layer before anything is written, read
// through float32 rounding, against iterate 0) count as equal, not as unrelated; any other
// similarity moves by at most 1e-6 relative.
constexpr double kSpdFloor = 1e-6;

// Layer l of every seed against every iterate, per prompt: for seed s, N x T1 matrices of the
// sums over k of (a - b)^2 and of a^2 + b^2 (+ the floor), and of the residual cosine.
struct PerPrompt {
  std::vector<arma::mat> sq_diff, sq_sum, cosine;  // one N x T1 per seed
};

PerPrompt Compare(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                  const arma::mat& labels, arma::uword l) {
  const arma::uword N = labels.n_cols, T1 = iterates.n_slices;
  const arma::rowvec label_sq = arma::sum(arma::square(labels), 0);
  PerPrompt p;
  for (const auto& layer : layers) {
    const arma::mat a = layer.slice(l);
    const arma::mat ra = a - labels;
    const arma::rowvec a_sq = arma::sum(arma::square(a), 0),
                       na = arma::sqrt(arma::sum(arma::square(ra), 0));
    arma::mat d(N, T1), q(N, T1), c(N, T1);
    for (arma::uword t = 0; t < T1; ++t) {
      const arma::mat& b = iterates.slice(t);  // K x N
      const arma::mat rb = b - labels;
      d.col(t) = arma::sum(arma::square(a - b), 0).t();
      q.col(t) = (a_sq + arma::sum(arma::square(b), 0) + kSpdFloor * label_sq).t();
      const arma::rowvec dot = arma::sum(ra % rb, 0),
                         nb = arma::sqrt(arma::sum(arma::square(rb), 0));
      for (arma::uword i = 0; i < N; ++i) {
        if (na(i) == 0 && nb(i) == 0)
          c(i, t) = 1;
        else if (na(i) == 0 || nb(i) == 0)
          c(i, t) = 0;
        else
          c(i, t) = dot(i) / (na(i) * nb(i));
      }
    }
    // Both predictions zero at every k (a layer before anything is written, iterate 0): equal.
    q.elem(arma::find(q == 0)).fill(1.0);
    p.sq_diff.push_back(std::move(d));
    p.sq_sum.push_back(std::move(q));
    p.cosine.push_back(std::move(c));
  }
  return p;
}

// The least-squares slope of v over x (NaN with fewer than two points).
double Slope(const std::vector<double>& x, const std::vector<double>& v) {
  if (x.size() < 2) return NAN;
  const arma::vec xv(x), vv(v);
  const arma::vec xc = xv - arma::mean(xv);
  const double sxx = arma::dot(xc, xc);
  return sxx > 0 ? arma::dot(xc, vv - arma::mean(vv)) / sxx : NAN;
}

// The rate of a best-iterate curve (see IterateMatch::rate) over the layers `ids`; `layers`
// counts the points used.
double Rate(const arma::vec& best, const std::vector<int>& ids, int steps, bool log_rate,
            int* layers = nullptr) {
  std::vector<double> x, v;
  for (arma::uword l = 0; l < best.n_elem; ++l)
    if (best(l) >= 1 && best(l) <= steps - 1) {
      x.push_back(double(ids[l]));
      v.push_back(log_rate ? std::log2(best(l)) : best(l));
    }
  if (layers) *layers = int(x.size());
  return Slope(x, v);
}

void CheckShapes(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                 const arma::mat& labels) {
  if (layers.empty()) throw std::logic_error("trace: no learner to match");
  for (const auto& c : layers)
    if (c.n_rows != labels.n_rows || c.n_cols != labels.n_cols || c.n_slices != layers[0].n_slices)
      throw std::logic_error("trace: the learners' predictions differ in shape");
  if (iterates.n_rows != labels.n_rows || iterates.n_cols != labels.n_cols)
    throw std::logic_error("trace: iterates and labels differ in shape");
}

// The similarity tables with their intervals, and the spd similarity of every bootstrap
// replicate (replicate, layer, iterate), for Summarise and the paired control margin.
struct Similarities {
  IterateMatch m;
  arma::cube spd_rep;
};

Similarities Similar(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                     const arma::mat& labels, const probes::Bootstrap& boot, double level) {
  const arma::uword L1 = layers[0].n_slices, T1 = iterates.n_slices;
  const int B = boot.replicates();
  Similarities r;
  IterateMatch& m = r.m;
  for (arma::mat* x : {&m.spd, &m.spd_lo, &m.spd_hi, &m.cos, &m.cos_lo, &m.cos_hi})
    x->set_size(L1, T1);
  r.spd_rep.set_size(B, L1, T1);
  const double S = double(layers.size());
  for (arma::uword l = 0; l < L1; ++l) {
    const PerPrompt p = Compare(layers, iterates, labels, l);
    // Point estimates: the mean over seeds of each seed's pooled similarity.
    arma::rowvec spd(T1, arma::fill::zeros), cos(T1, arma::fill::zeros);
    for (std::size_t s = 0; s < layers.size(); ++s) {
      spd += 1.0 - arma::sum(p.sq_diff[s], 0) / arma::sum(p.sq_sum[s], 0);
      cos += arma::mean(p.cosine[s], 0);
    }
    m.spd.row(l) = spd / S;
    m.cos.row(l) = cos / S;
    const arma::mat rs = boot.MeanR2(p.sq_diff, p.sq_sum);  // B x T1
    const arma::mat rc = boot.MeanOverSeeds(p.cosine);
    for (arma::uword t = 0; t < T1; ++t) {
      for (int b = 0; b < B; ++b)
        r.spd_rep(b, l, t) = rs(b, t);
      const probes::Interval is = probes::PercentileInterval(rs.col(t), level),
                             ic = probes::PercentileInterval(rc.col(t), level);
      m.spd_lo(l, t) = is.lo;
      m.spd_hi(l, t) = is.hi;
      m.cos_lo(l, t) = ic.lo;
      m.cos_hi(l, t) = ic.hi;
    }
  }
  return r;
}

// Each replicate's best similarity per layer over the iterates from `first` on: B x L1.
arma::mat BestSpdReplicates(const arma::cube& spd_rep, arma::uword first = 0) {
  arma::mat out(spd_rep.n_rows, spd_rep.n_cols);
  for (arma::uword l = 0; l < spd_rep.n_cols; ++l)
    for (arma::uword b = 0; b < spd_rep.n_rows; ++b) {
      double best = -INFINITY;
      for (arma::uword t = first; t < spd_rep.n_slices; ++t)
        best = std::max(best, spd_rep(b, l, t));
      out(b, l) = best;
    }
  return out;
}

// The best iterate per layer, its similarity, the margin over its neighbours and the rate.
void Summarise(Similarities& r, const std::vector<int>& ids, double level) {
  IterateMatch& m = r.m;
  const arma::cube& spd_rep = r.spd_rep;
  const arma::uword L1 = m.spd.n_rows, T1 = m.spd.n_cols;
  const int B = int(spd_rep.n_rows), steps = int(T1) - 1;
  for (arma::vec* v : {&m.best, &m.best_lo, &m.best_hi, &m.margin, &m.margin_lo, &m.margin_hi,
                       &m.best_spd, &m.best_spd_lo, &m.best_spd_hi})
    v->set_size(L1);
  arma::mat best_rep(B, L1);
  const arma::mat best_spd_rep = BestSpdReplicates(spd_rep);
  for (arma::uword l = 0; l < L1; ++l) {
    const arma::uword t_star = m.spd.row(l).index_max();
    m.best(l) = double(t_star);
    m.best_spd(l) = m.spd(l, t_star);
    const probes::Interval is = probes::PercentileInterval(best_spd_rep.col(l), level);
    m.best_spd_lo(l) = is.lo;
    m.best_spd_hi(l) = is.hi;
    for (int b = 0; b < B; ++b) {
      arma::uword bt = 0;
      for (arma::uword t = 1; t < T1; ++t)
        if (spd_rep(b, l, t) > spd_rep(b, l, bt)) bt = t;
      best_rep(b, l) = double(bt);
    }
    const probes::Interval ib = probes::PercentileInterval(best_rep.col(l), level);
    m.best_lo(l) = ib.lo;
    m.best_hi(l) = ib.hi;
    // The paired margin over the nearer-scoring neighbour, per replicate.
    arma::vec rep(B);
    bool any = false;
    double point = INFINITY;
    for (int b = 0; b < B; ++b)
      rep(b) = INFINITY;
    for (int dt : {-1, 1}) {
      const long u = long(t_star) + dt;
      if (u < 0 || u > steps) continue;
      any = true;
      point = std::min(point, m.spd(l, t_star) - m.spd(l, u));
      for (int b = 0; b < B; ++b)
        rep(b) = std::min(rep(b), spd_rep(b, l, t_star) - spd_rep(b, l, u));
    }
    if (!any) {
      m.margin(l) = m.margin_lo(l) = m.margin_hi(l) = NAN;
      continue;
    }
    m.margin(l) = point;
    const probes::Interval im = probes::PercentileInterval(rep, level);
    m.margin_lo(l) = im.lo;
    m.margin_hi(l) = im.hi;
  }
  for (bool log2 : {false, true}) {
    double& point = log2 ? m.log2_rate : m.rate;
    point = Rate(m.best, ids, steps, log2, &m.rate_layers);
    arma::vec rates(B);
    for (int b = 0; b < B; ++b)
      rates(b) = Rate(best_rep.row(b).t(), ids, steps, log2);
    if (arma::uvec(arma::find_finite(rates)).n_elem == rates.n_elem) {
      const probes::Interval ir = probes::PercentileInterval(rates, level);
      (log2 ? m.log2_rate_lo : m.rate_lo) = ir.lo;
      (log2 ? m.log2_rate_hi : m.rate_hi) = ir.hi;
    }
  }
}

std::vector<int> LayerIds(const std::vector<int>& given, arma::uword count) {
  if (given.empty()) {
    std::vector<int> ids(count);
    for (arma::uword l = 0; l < count; ++l)
      ids[l] = int(l);
    return ids;
  }
  if (given.size() != count) throw std::logic_error("trace: one layer id per slice expected");
  return given;
}

}  // namespace

IterateMatch MatchIterates(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                           const arma::mat& labels, int replicates, std::uint64_t seed,
                           double level, const std::vector<int>& layer_ids) {
  CheckShapes(layers, iterates, labels);
  // Every seed is scored on the same prompts: one prompt resample per replicate for all of them.
  const probes::Bootstrap boot(labels.n_cols, int(layers.size()), replicates, seed,
                               /*shared_prompts=*/true);
  Similarities r = Similar(layers, iterates, labels, boot, level);
  Summarise(r, LayerIds(layer_ids, layers[0].n_slices), level);
  return r.m;
}

TracedPair MatchWithControls(const std::vector<arma::cube>& layers,
                             const std::vector<arma::cube>& controls, const arma::cube& iterates,
                             const arma::mat& labels, int replicates, std::uint64_t seed,
                             double level, const std::vector<int>& layer_ids) {
  CheckShapes(layers, iterates, labels);
  if (controls.size() != layers.size() && controls.size() != 1)
    throw std::logic_error("trace: one control per learner, or one for all");
  // One control for every seed: the same control under each seed's resample, so each replicate
  // pairs a seed's prompts with the control's predictions on the same prompts.
  const std::vector<arma::cube> paired = controls.size() == layers.size()
                                             ? controls
                                             : std::vector<arma::cube>(layers.size(), controls[0]);
  CheckShapes(paired, iterates, labels);
  if (paired[0].n_slices != layers[0].n_slices)
    throw std::logic_error("trace: control and learner differ in layers");
  // Every seed is scored on the same prompts: one prompt resample per replicate for all of them.
  const probes::Bootstrap boot(labels.n_cols, int(layers.size()), replicates, seed,
                               /*shared_prompts=*/true);
  const std::vector<int> ids = LayerIds(layer_ids, layers[0].n_slices);
  Similarities rm = Similar(layers, iterates, labels, boot, level);
  Similarities rc = Similar(paired, iterates, labels, boot, level);
  Summarise(rm, ids, level);
  Summarise(rc, ids, level);
  // Iterate 0 predicts 0: a layer that has computed nothing matches it, and a control whose
  // readout predicts anything else would make that a margin. The excess compares the best match
  // among the iterates that have computed something (t >= 1).
  const arma::uword first = iterates.n_slices > 1 ? 1 : 0;
  const arma::mat diff =
      BestSpdReplicates(rm.spd_rep, first) - BestSpdReplicates(rc.spd_rep, first);
  IterateMatch& m = rm.m;
  m.excess = arma::max(rm.m.spd.cols(first, rm.m.spd.n_cols - 1), 1) -
             arma::max(rc.m.spd.cols(first, rc.m.spd.n_cols - 1), 1);
  m.excess_lo.set_size(m.excess.n_elem);
  m.excess_hi.set_size(m.excess.n_elem);
  for (arma::uword l = 0; l < m.excess.n_elem; ++l) {
    const probes::Interval i = probes::PercentileInterval(diff.col(l), level);
    m.excess_lo(l) = i.lo;
    m.excess_hi(l) = i.hi;
  }
  return {std::move(rm.m), std::move(rc.m)};
}

}  // namespace icl::analysis
