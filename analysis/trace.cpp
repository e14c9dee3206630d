// Per-layer predictions and algorithm iterates (trace.hpp): the algorithms, their iterates and
// each layer's readout.
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
                        const std::vector<int>& layers, core::ThreadPool* pool) {
  CheckKs(ks, eval.task.n);
  for (int l : layers)
    if (l < 0 || l > model->config.layers)
      throw core::InputError("trace", "layers",
                             std::to_string(l) + " is outside 0.." +
                                 std::to_string(model->config.layers) + " (the model's states)");
  // The scored rows, then the fit rows: one stream, the rows of a trace's activations file.
  auto all = std::make_shared<data::PromptSet>(eval);
  if (fit.size() > 0) {
    all->x = arma::join_slices(eval.x, fit.x);
    all->y = arma::join_rows(eval.y, fit.y);
    all->w = arma::join_rows(eval.w, fit.w);
  }
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
    const auto group = [&](std::int64_t j) {
      const std::int64_t g0 = (j0 + j) * G,
                         g = std::min<std::int64_t>(G, std::int64_t(all->size()) - g0);
      const learners::ForwardResult r = extract::RunGroup(model, *all, g0, g);
      const std::int64_t a = std::max(first, g0), b = std::min(last, g0 + g);
      for (std::size_t i = 0; i < layers.size(); ++i)
        out[i]
            .slice(0, a - first, b - first)
            .copy_(r.hidden[layers[i]].slice(0, a - g0, b - g0).index_select(1, index));
    };
    if (pool)
      pool->For(j1 - j0, group);
    else
      for (std::int64_t j = 0; j < j1 - j0; ++j)
        group(j);
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

}  // namespace icl::analysis
