// Per-layer predictions matched to algorithm iterates (trace.hpp).
#include "analysis/trace.hpp"

#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "data/tokens_torch.hpp"
#include "probes/ridge.hpp"
#include "probes/uncertainty.hpp"

namespace icl::analysis {

TraceAlgorithm ParseTraceAlgorithm(const std::string& text, const data::TaskConfig& task) {
  const core::Spec s = core::ParseSpec(text);
  const auto bad = [&](const std::string& what) {
    return core::InputError("trace", "algorithms",
                            "'" + text + "': " + what +
                                " (expected gd:ALPHA:T, newton:T[:C[:LAMBDA]] or "
                                "ridge-path:HI:LO:T, T in 1.." +
                                std::to_string(kMaxTraceIterates) + ")");
  };
  TraceAlgorithm a;
  a.spec = s.text;
  a.family = s.name;
  if (s.name == "gd") {
    const auto alpha = s.Number(0);
    const auto steps = s.Integer(1, 1, kMaxTraceIterates);
    if (s.args.size() != 2 || !alpha || !(*alpha > 0) || !steps)
      throw bad("gd needs a step size > 0 and a step count");
    a.steps = int(*steps);
    a.learner = std::make_shared<learners::GdLearner>(*alpha, a.steps);
  } else if (s.name == "newton") {
    const auto steps = s.Integer(0, 1, kMaxTraceIterates);
    if (s.args.empty() || s.args.size() > 3 || !steps) throw bad("newton needs a step count");
    a.steps = int(*steps);
    a.learner = learners::MakeLearner(s.text, task);  // checks C and LAMBDA
  } else if (s.name == "ridge-path") {
    const auto hi = s.Number(0), lo = s.Number(1);
    const auto steps = s.Integer(2, 1, kMaxTraceIterates);
    if (s.args.size() != 3 || !hi || !lo || !steps || !(*lo > 0) || !(*hi > *lo))
      throw bad("ridge-path needs penalties HI > LO > 0 and a count");
    a.steps = int(*steps);
    for (int t = 0; t < a.steps; ++t)
      a.lambdas.push_back(a.steps == 1 ? *hi
                                       : std::exp(std::log(*hi) + (std::log(*lo) - std::log(*hi)) *
                                                                      t / (a.steps - 1)));
  } else {
    throw bad("unknown algorithm");
  }
  return a;
}

arma::mat TraceLabels(const data::PromptSet& set, const std::vector<int>& ks) {
  arma::mat y(ks.size(), set.size());
  for (std::size_t i = 0; i < set.size(); ++i)
    for (std::size_t j = 0; j < ks.size(); ++j)
      y(j, i) = set.QueryY(i, ks[j]);
  return y;
}

namespace {

void CheckKs(const std::vector<int>& ks, int n) {
  if (ks.empty()) throw core::InputError("trace", "k", "no prompt length k given");
  for (int k : ks)
    if (k < 0 || k >= n)
      throw core::InputError("trace", "k",
                             std::to_string(k) + " is outside 0.." + std::to_string(n - 1) +
                                 " (the prompts have n = " + std::to_string(n) + " examples)");
}

// x_{k+1}^T w_ridge(lambda) on the first k examples (0 with none), for every lambda.
void RidgePath(const arma::mat& x, const arma::vec& y, int k, const arma::vec& query,
               const std::vector<double>& lambdas, double* out) {
  if (k == 0) {
    std::fill(out, out + lambdas.size(), 0.0);
    return;
  }
  const arma::mat xk = x.head_cols(k);
  const arma::mat a = xk * xk.t();
  const arma::vec b = xk * y.head(k);
  for (std::size_t t = 0; t < lambdas.size(); ++t) {
    const arma::vec w = arma::solve(arma::symmatu(a + lambdas[t] * arma::eye(a.n_rows, a.n_rows)),
                                    b, arma::solve_opts::likely_sympd);
    out[t] = arma::dot(query, w);
  }
}

}  // namespace

arma::cube IteratePredictions(const TraceAlgorithm& a, const data::PromptSet& set,
                              const std::vector<int>& ks) {
  CheckKs(ks, set.task.n);
  if (set.task.HasQueries())
    throw core::InputError("trace", "task", "query-shifted prompts are not traced");
  const int d = set.task.d;
  arma::cube out(ks.size(), set.size(), a.steps + 1, arma::fill::zeros);
  std::vector<double> path(a.lambdas.size());
  for (std::size_t i = 0; i < set.size(); ++i) {
    const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, set.task.n, false, true);
    const arma::vec y = set.y.col(i);
    if (a.learner) {
      // Row t - 1, column k: iterate t's prediction of y_{k+1} from k examples.
      const arma::mat steps = a.learner->StepPredictions(x, y);
      for (std::size_t j = 0; j < ks.size(); ++j)
        for (int t = 1; t <= a.steps; ++t)
          out(j, i, t) = steps(t - 1, ks[j]);
    } else {
      for (std::size_t j = 0; j < ks.size(); ++j) {
        const arma::vec q(const_cast<double*>(set.QueryX(i, ks[j])), d, false, true);
        RidgePath(x, y, ks[j], q, a.lambdas, path.data());
        for (int t = 1; t <= a.steps; ++t)
          out(j, i, t) = path[t - 1];
      }
    }
  }
  return out;
}

namespace {

// Every state (embedding, then each block) at the x-tokens of examples k + 1, k in ks, for
// prompts [begin, begin + count) of `set`: per layer [count, K, H] float32.
std::vector<torch::Tensor> QueryStates(learners::Transformer& model, const data::PromptSet& set,
                                       std::size_t begin, std::size_t count,
                                       const std::vector<int>& ks) {
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = data::TokenTensor(set, begin, count);
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  const learners::ForwardResult r = model->Run(tokens, fo);
  std::vector<std::int64_t> pos;
  for (int k : ks)
    pos.push_back(2L * k);  // the x-token of example k + 1
  const torch::Tensor index = torch::tensor(pos, torch::kLong);
  std::vector<torch::Tensor> out;
  for (const auto& h : r.hidden)
    out.push_back(h.index_select(1, index).contiguous());  // [count, K, H]
  return out;
}

// One layer's states as an Armadillo H x (count K) matrix (column = (prompt, k), k fastest).
arma::mat AsColumns(const torch::Tensor& states) {
  const torch::Tensor s = states.to(torch::kFloat64).contiguous();
  const auto H = s.size(2);
  return arma::mat(s.data_ptr<double>(), H, s.size(0) * s.size(1));
}

}  // namespace

arma::cube LayerPredictions(learners::Transformer& model, const data::PromptSet& fit,
                            const data::PromptSet& eval, const std::vector<int>& ks,
                            Readout readout, const arma::vec& lambdas, int batch) {
  const int L = model->config.layers, K = int(ks.size());
  CheckKs(ks, eval.task.n);
  if (eval.task.HasQueries())
    throw core::InputError("trace", "task", "query-shifted prompts are not traced");
  if (batch < 1) throw std::logic_error("trace: batch must be positive");
  model->eval();
  arma::cube out(K, eval.size(), L + 1);
  if (readout == Readout::kLens) {
    torch::NoGradGuard no_grad;
    for (std::size_t b = 0; b < eval.size(); b += batch) {
      const std::size_t count = std::min<std::size_t>(batch, eval.size() - b);
      const auto states = QueryStates(model, eval, b, count, ks);
      for (int l = 0; l <= L; ++l) {
        torch::Tensor h = states[l];
        if (model->final_ln) h = model->final_ln->forward(h);
        const torch::Tensor p =
            model->readout->forward(h).squeeze(-1).to(torch::kFloat64).contiguous();  // [c, K]
        const arma::mat pm(p.data_ptr<double>(), K, count);
        out.slice(l).cols(b, b + count - 1) = pm;
      }
    }
    return out;
  }
  CheckKs(ks, fit.task.n);
  const arma::mat y_fit = TraceLabels(fit, ks);
  // Pass 1 over the fit prompts: feature statistics; pass 2: targets and leave-one-out errors.
  const int H = model->config.hidden;
  std::vector<probes::RidgeProbe> probe(L + 1, probes::RidgeProbe(lambdas));
  std::vector<probes::FeatureStats> fs(L + 1);
  std::vector<probes::TargetStats> ts(L + 1);
  for (int l = 0; l <= L; ++l) {
    fs[l].Init(H);
    ts[l].Init(H, 1);
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t b = 0; b < fit.size(); b += batch) {
      const std::size_t count = std::min<std::size_t>(batch, fit.size() - b);
      const auto states = QueryStates(model, fit, b, count, ks);
      const arma::mat yb = arma::vectorise(y_fit.cols(b, b + count - 1)).t();  // 1 x (c K)
      for (int l = 0; l <= L; ++l) {
        const arma::mat x = AsColumns(states[l]);
        if (pass == 0) {
          fs[l].Add(x);
          ts[l].Add(x, yb);
        } else {
          probe[l].AccumulateLoo(x, yb);
        }
      }
    }
    if (pass == 0)
      for (int l = 0; l <= L; ++l) {
        probe[l].Prepare(fs[l]);
        probe[l].Begin(ts[l]);
      }
  }
  for (int l = 0; l <= L; ++l)
    probe[l].Select();
  for (std::size_t b = 0; b < eval.size(); b += batch) {
    const std::size_t count = std::min<std::size_t>(batch, eval.size() - b);
    const auto states = QueryStates(model, eval, b, count, ks);
    for (int l = 0; l <= L; ++l) {
      const arma::mat p = probe[l].Predict(AsColumns(states[l]));  // 1 x (c K)
      out.slice(l).cols(b, b + count - 1) = arma::reshape(p, K, count);
    }
  }
  return out;
}

namespace {

// The spd similarity's denominator gets kSpdFloor times the labels' energy: two predictions
// that both stay below 1e-3 of the labels' rms (a layer before anything is written, read
// through float32 rounding, against iterate 0) count as equal, not as unrelated; any other
// similarity moves by at most 1e-6 relative.
constexpr double kSpdFloor = 1e-6;

// Per prompt i (rows) and seed s (columns): the sums over k of (a - b)^2 and a^2 + b^2, and the
// residual cosine, for layer l of every seed and iterate t.
struct PerPrompt {
  arma::mat sq_diff, sq_sum, cosine;  // N x S
};

PerPrompt Compare(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                  const arma::mat& labels, arma::uword l, arma::uword t) {
  const arma::uword N = labels.n_cols, S = layers.size();
  PerPrompt p{arma::mat(N, S), arma::mat(N, S), arma::mat(N, S)};
  const arma::mat b = iterates.slice(t);  // K x N
  const arma::mat rb = b - labels;
  const arma::vec label_sq = arma::sum(arma::square(labels), 0).t();
  for (arma::uword s = 0; s < S; ++s) {
    const arma::mat a = layers[s].slice(l);
    const arma::mat ra = a - labels;
    p.sq_diff.col(s) = arma::sum(arma::square(a - b), 0).t();
    p.sq_sum.col(s) = arma::sum(arma::square(a) + arma::square(b), 0).t() + kSpdFloor * label_sq;
    const arma::rowvec dot = arma::sum(ra % rb, 0);
    const arma::rowvec na = arma::sqrt(arma::sum(arma::square(ra), 0)),
                       nb = arma::sqrt(arma::sum(arma::square(rb), 0));
    for (arma::uword i = 0; i < N; ++i) {
      if (na(i) == 0 && nb(i) == 0)
        p.cosine(i, s) = 1;
      else if (na(i) == 0 || nb(i) == 0)
        p.cosine(i, s) = 0;
      else
        p.cosine(i, s) = dot(i) / (na(i) * nb(i));
    }
  }
  // Both predictions zero at every k (a layer before anything is written, iterate 0): equal.
  p.sq_sum.elem(arma::find(p.sq_sum == 0)).fill(1.0);
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

// The rate of a best-iterate curve (see IterateMatch::rate); layers counts the points used.
double Rate(const arma::vec& best, int steps, bool log_rate, int* layers = nullptr) {
  std::vector<double> x, v;
  for (arma::uword l = 0; l < best.n_elem; ++l)
    if (best(l) >= 1 && best(l) <= steps - 1) {
      x.push_back(double(l));
      v.push_back(log_rate ? std::log2(best(l)) : best(l));
    }
  if (layers) *layers = int(x.size());
  return Slope(x, v);
}

}  // namespace

IterateMatch MatchIterates(const std::vector<arma::cube>& layers, const arma::cube& iterates,
                           const arma::mat& labels, int replicates, std::uint64_t seed,
                           double level) {
  if (layers.empty()) throw std::logic_error("trace: no learner to match");
  const arma::uword K = labels.n_rows, N = labels.n_cols, L1 = layers[0].n_slices,
                    T1 = iterates.n_slices, S = layers.size();
  for (const auto& c : layers)
    if (c.n_rows != K || c.n_cols != N || c.n_slices != L1)
      throw std::logic_error("trace: the learners' predictions differ in shape");
  if (iterates.n_rows != K || iterates.n_cols != N)
    throw std::logic_error("trace: iterates and labels differ in shape");
  const probes::Bootstrap boot(N, int(S), replicates, seed);
  const int B = boot.replicates();
  IterateMatch m;
  for (arma::mat* x : {&m.spd, &m.spd_lo, &m.spd_hi, &m.cos, &m.cos_lo, &m.cos_hi})
    x->set_size(L1, T1);
  arma::cube spd_rep(B, L1, T1);  // replicate, layer, iterate
  for (arma::uword l = 0; l < L1; ++l)
    for (arma::uword t = 0; t < T1; ++t) {
      const PerPrompt p = Compare(layers, iterates, labels, l, t);
      // Point estimates: the mean over seeds of each seed's pooled similarity.
      m.spd(l, t) = arma::mean(1.0 - arma::sum(p.sq_diff, 0) / arma::sum(p.sq_sum, 0));
      m.cos(l, t) = arma::mean(arma::mean(p.cosine, 0));
      const arma::vec rs = boot.MeanR2(p.sq_diff, p.sq_sum);
      const arma::vec rc = boot.MeanOverSeeds(p.cosine);
      for (int b = 0; b < B; ++b)
        spd_rep(b, l, t) = rs(b);
      const probes::Interval is = probes::PercentileInterval(rs, level),
                             ic = probes::PercentileInterval(rc, level);
      m.spd_lo(l, t) = is.lo;
      m.spd_hi(l, t) = is.hi;
      m.cos_lo(l, t) = ic.lo;
      m.cos_hi(l, t) = ic.hi;
    }
  const int steps = int(T1) - 1;
  m.best.set_size(L1);
  m.best_lo.set_size(L1);
  m.best_hi.set_size(L1);
  m.margin.set_size(L1);
  m.margin_lo.set_size(L1);
  m.margin_hi.set_size(L1);
  arma::mat best_rep(B, L1);
  for (arma::uword l = 0; l < L1; ++l) {
    const arma::uword t_star = m.spd.row(l).index_max();
    m.best(l) = double(t_star);
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
    point = Rate(m.best, steps, log2, &m.rate_layers);
    arma::vec rates(B);
    for (int b = 0; b < B; ++b)
      rates(b) = Rate(best_rep.row(b).t(), steps, log2);
    if (arma::uvec(arma::find_finite(rates)).n_elem == rates.n_elem) {
      const probes::Interval ir = probes::PercentileInterval(rates, level);
      (log2 ? m.log2_rate_lo : m.rate_lo) = ir.lo;
      (log2 ? m.log2_rate_hi : m.rate_hi) = ir.hi;
    }
  }
  return m;
}

}  // namespace icl::analysis
