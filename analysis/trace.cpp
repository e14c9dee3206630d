// Per-layer predictions matched to algorithm iterates (trace.hpp).
#include "analysis/trace.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "core/thread_pool.hpp"
#include "data/tokens_torch.hpp"
#include "extract/forward.hpp"
#include "probes/ridge.hpp"
#include "probes/uncertainty.hpp"

namespace icl::analysis {

TraceAlgorithm ParseTraceAlgorithm(const std::string& text, const data::TaskConfig& task) {
  const core::Spec s = core::ParseSpec(text);
  const auto bad = [&](const std::string& what) {
    return core::InputError("trace", "algorithms",
                            "'" + text + "': " + what +
                                " (expected gd:ALPHA:T, sgd:ALPHA:T, newton:T[:C[:LAMBDA]] or "
                                "ridge-path:HI:LO:T, T in 1.." +
                                std::to_string(kMaxTraceIterates) + ")");
  };
  for (const char c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != ':' && c != '+' &&
        c != '-')
      throw bad("only letters, digits and . : + - are allowed");
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
  } else if (s.name == "sgd") {
    const auto alpha = s.Number(0);
    const auto steps = s.Integer(1, 1, kMaxTraceIterates);
    if (s.args.size() != 2 || !alpha || !(*alpha > 0) || !steps)
      throw bad("sgd needs a step size > 0 and a pass count");
    a.steps = int(*steps);
    a.alpha = *alpha;
  } else if (s.name == "newton") {
    // learners/'s Newton takes at most 100 steps (2^100 GD steps: converged long before).
    const auto steps = s.Integer(0, 1, 100);
    if (s.args.empty() || s.args.size() > 3 || !steps)
      throw bad("newton needs a step count of at most 100");
    a.steps = int(*steps);
    a.learner = learners::MakeLearner(s.text, task, "algorithms");  // checks C and LAMBDA
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

// x_{k+1}^T w after each of `passes` passes of SGD (batch 1, examples 1..k in order) from w = 0:
// w <- w - 2 alpha (x_i x_i^T w - y_i x_i), docs/paper.md's SGD; pass 1 is its one-pass learner.
void SgdPasses(const arma::mat& x, const arma::vec& y, int k, const arma::vec& query, double alpha,
               int passes, double* out) {
  arma::vec w(x.n_rows, arma::fill::zeros);
  for (int t = 0; t < passes; ++t) {
    for (int i = 0; i < k; ++i)
      w -= 2 * alpha * (x.col(i) * (arma::dot(x.col(i), w) - y(i)));
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
  std::vector<double> path(std::max<std::size_t>(a.lambdas.size(), a.steps));
  for (std::size_t i = 0; i < set.size(); ++i) {
    const arma::mat x(const_cast<double*>(set.x.slice_memptr(i)), d, set.task.n, false, true);
    const arma::vec y = set.y.col(i);
    if (a.learner) {
      // Row t - 1, column k: iterate t's prediction of y_{k+1} from k examples.
      const arma::mat steps = a.learner->StepPredictions(x, y);
      for (std::size_t j = 0; j < ks.size(); ++j)
        for (int t = 1; t <= a.steps; ++t)
          out(j, i, t) = steps(t - 1, ks[j]);
    } else if (a.family == "sgd") {
      for (std::size_t j = 0; j < ks.size(); ++j) {
        const arma::vec q(const_cast<double*>(set.QueryX(i, ks[j])), d, false, true);
        SgdPasses(x, y, ks[j], q, a.alpha, a.steps, path.data());
        for (int t = 1; t <= a.steps; ++t)
          out(j, i, t) = path[t - 1];
      }
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

Readout ParseReadout(const std::string& name) {
  if (name == "lens") return Readout::kLens;
  if (name == "ridge") return Readout::kRidge;
  throw core::InputError("trace", "readout",
                         "expected lens or ridge, got '" + name.substr(0, 40) + "'");
}

const char* ReadoutName(Readout r) {
  return r == Readout::kLens ? "lens" : "ridge";
}

namespace {

std::vector<std::int64_t> QueryPositions(const std::vector<int>& ks) {
  std::vector<std::int64_t> pos;
  for (int k : ks)
    pos.push_back(2L * k);  // the x-token of example k + 1
  return pos;
}

// One layer's states as an Armadillo H x (count K) matrix (column = (prompt, k), k fastest).
arma::mat AsColumns(const torch::Tensor& states) {
  const torch::Tensor s = states.to(torch::kFloat64).contiguous();
  const auto H = s.size(2);
  return arma::mat(s.data_ptr<double>(), H, s.size(0) * s.size(1));
}

}  // namespace

QueryStates ModelStates(learners::Transformer& model, const data::PromptSet& fit,
                        const data::PromptSet& eval, const std::vector<int>& ks,
                        const std::vector<int>& layers, int threads) {
  CheckKs(ks, eval.task.n);
  for (int l : layers)
    if (l < 0 || l > model->config.layers)
      throw core::InputError("trace", "layers",
                             std::to_string(l) + " is outside 0.." +
                                 std::to_string(model->config.layers) + " (the model's states)");
  if (threads < 1) throw std::logic_error("trace: threads must be positive");
  // The scored rows, then the fit rows: one stream, the rows of a trace's activations file.
  auto all = std::make_shared<data::PromptSet>(eval);
  if (fit.size() > 0) {
    all->x = arma::join_slices(eval.x, fit.x);
    all->y = arma::join_rows(eval.y, fit.y);
    all->w = arma::join_rows(eval.w, fit.w);
  }
  auto pool = std::make_shared<core::ThreadPool>(threads);
  const torch::Tensor index = torch::tensor(QueryPositions(ks), torch::kLong);
  const std::int64_t eval_rows = std::int64_t(eval.size());
  model->eval();
  return [&model, all, pool, index, layers, eval_rows](bool from_fit, std::size_t begin,
                                                       std::size_t count) {
    const std::int64_t G = extract::kComputeGroup,
                       first = std::int64_t(begin) + (from_fit ? eval_rows : 0),
                       last = first + std::int64_t(count);
    const std::int64_t K = index.size(0), H = model->config.hidden;
    std::vector<torch::Tensor> out;
    for (std::size_t i = 0; i < layers.size(); ++i)
      out.push_back(torch::empty({std::int64_t(count), K, H}, torch::kFloat32));
    // Whole groups of the stream, as extract runs them: a group that straddles [first, last)
    // is run whole and only its rows inside are kept.
    const std::int64_t j0 = first / G, j1 = (last + G - 1) / G;
    pool->For(j1 - j0, [&](std::int64_t j) {
      const std::int64_t g0 = (j0 + j) * G,
                         g = std::min<std::int64_t>(G, std::int64_t(all->size()) - g0);
      const learners::ForwardResult r = extract::RunGroup(model, *all, g0, g);
      const std::int64_t a = std::max(first, g0), b = std::min(last, g0 + g);
      for (std::size_t i = 0; i < layers.size(); ++i)
        out[i]
            .slice(0, a - first, b - first)
            .copy_(r.hidden[layers[i]].slice(0, a - g0, b - g0).index_select(1, index));
    });
    return out;
  };
}

QueryStates FileStates(const extract::ActivationsInfo& info, std::size_t eval_rows,
                       const std::vector<int>& ks, const std::vector<int>& layers) {
  CheckKs(ks, info.task.n);
  if (info.positions != extract::Positions::kAll)
    throw core::InputError("'" + info.path + "'", "",
                           "holds the states after k examples only (the y-tokens); a trace "
                           "reads the x-tokens where predictions are made: extract every "
                           "position");
  auto readers = std::make_shared<std::vector<extract::HiddenReader>>();
  for (int l : layers) {
    if (std::find(info.layers.begin(), info.layers.end(), l) == info.layers.end())
      throw core::InputError("trace", "layers",
                             "'" + info.path + "' holds no state " + std::to_string(l) +
                                 " (it holds " + std::to_string(info.layers.size()) +
                                 " states of layers 0.." + std::to_string(info.model.layers) + ")");
    readers->emplace_back(info, l);
  }
  const std::vector<std::int64_t> pos = QueryPositions(ks);
  return [readers, pos, eval_rows](bool from_fit, std::size_t begin, std::size_t count) {
    const std::int64_t K = pos.size();
    std::vector<torch::Tensor> out;
    for (const auto& r : *readers) {
      const arma::fmat block = r.Read(std::int64_t(begin + (from_fit ? eval_rows : 0)), count);
      const std::int64_t H = r.hidden();
      torch::Tensor t = torch::empty({std::int64_t(count), K, H}, torch::kFloat32);
      float* dst = t.data_ptr<float>();
      for (std::size_t i = 0; i < count; ++i)
        for (std::int64_t j = 0; j < K; ++j)
          std::copy_n(block.colptr(i) + pos[j] * H, H, dst + (i * K + j) * H);
      out.push_back(std::move(t));
    }
    return out;
  };
}

arma::cube LayerPredictions(const QueryStates& states, int layers, learners::Transformer* lens,
                            const arma::mat& fit_labels, std::size_t eval_prompts, Readout readout,
                            const arma::vec& lambdas, int batch,
                            const std::function<void(std::size_t)>& on_prompts) {
  if (batch < 1) throw std::logic_error("trace: batch must be positive");
  const arma::uword K = fit_labels.n_rows;
  arma::cube out(K, eval_prompts, layers);
  const auto read = [&](bool fit, std::size_t b, std::size_t count) {
    auto s = states(fit, b, count);
    if (int(s.size()) != layers) throw std::logic_error("trace: states of another layer count");
    if (on_prompts) on_prompts(count);
    return s;
  };
  if (readout == Readout::kLens) {
    if (!lens) throw std::logic_error("trace: the lens needs the model");
    torch::NoGradGuard no_grad;
    (*lens)->eval();
    for (std::size_t b = 0; b < eval_prompts; b += batch) {
      const std::size_t count = std::min<std::size_t>(batch, eval_prompts - b);
      const auto s = read(false, b, count);
      for (int l = 0; l < layers; ++l) {
        torch::Tensor h = s[l];
        if ((*lens)->final_ln) h = (*lens)->final_ln->forward(h);
        const torch::Tensor p =
            (*lens)->readout->forward(h).squeeze(-1).to(torch::kFloat64).contiguous();  // [c, K]
        out.slice(l).cols(b, b + count - 1) = arma::mat(p.data_ptr<double>(), K, count);
      }
    }
    return out;
  }
  // Pass 1 over the fit prompts: feature statistics; pass 2: targets and leave-one-out errors.
  const std::size_t F = fit_labels.n_cols;
  if (F < 2) throw std::logic_error("trace: the ridge readout needs fit prompts");
  std::vector<probes::RidgeProbe> probe(layers, probes::RidgeProbe(lambdas));
  std::vector<probes::FeatureStats> fs(layers);
  std::vector<probes::TargetStats> ts(layers);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t b = 0; b < F; b += batch) {
      const std::size_t count = std::min<std::size_t>(batch, F - b);
      const auto s = read(true, b, count);
      const arma::mat yb = arma::vectorise(fit_labels.cols(b, b + count - 1)).t();  // 1 x (c K)
      for (int l = 0; l < layers; ++l) {
        const arma::mat x = AsColumns(s[l]);
        if (pass == 1) {
          probe[l].AccumulateLoo(x, yb);
          continue;
        }
        if (b == 0) {
          fs[l].Init(x.n_rows);
          ts[l].Init(x.n_rows, 1);
        }
        fs[l].Add(x);
        ts[l].Add(x, yb);
      }
    }
    if (pass == 0)
      for (int l = 0; l < layers; ++l) {
        probe[l].Prepare(fs[l]);
        probe[l].Begin(ts[l]);
      }
  }
  for (int l = 0; l < layers; ++l)
    probe[l].Select();
  for (std::size_t b = 0; b < eval_prompts; b += batch) {
    const std::size_t count = std::min<std::size_t>(batch, eval_prompts - b);
    const auto s = read(false, b, count);
    for (int l = 0; l < layers; ++l) {
      const arma::mat p = probe[l].Predict(AsColumns(s[l]));  // 1 x (c K)
      out.slice(l).cols(b, b + count - 1) = arma::reshape(p, K, count);
    }
  }
  return out;
}

arma::cube LayerPredictions(learners::Transformer& model, const data::PromptSet& fit,
                            const data::PromptSet& eval, const std::vector<int>& ks,
                            Readout readout, const arma::vec& lambdas, int batch) {
  if (eval.task.HasQueries() || (readout == Readout::kRidge && fit.task.HasQueries()))
    throw core::InputError("trace", "task", "query-shifted prompts are not traced");
  std::vector<int> layers;
  for (int l = 0; l <= model->config.layers; ++l)
    layers.push_back(l);
  const arma::mat fit_labels =
      readout == Readout::kRidge ? TraceLabels(fit, ks) : arma::mat(ks.size(), 0);
  return LayerPredictions(ModelStates(model, fit, eval, ks, layers), int(layers.size()), &model,
                          fit_labels, eval.size(), readout, lambdas, batch);
}

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
