// Distributed alignment search (das.hpp): the request, the counterfactual outputs of an
// algorithm, and the run over layers and subspace sizes.
#include "intervene/das.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/spec.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "intervene/das_internal.hpp"
#include "intervene/file_common.hpp"
#include "intervene/intervene.hpp"
#include "learners/arma_torch.hpp"
#include "learners/classical.hpp"

namespace icl::intervene {

std::string DasPositionName(DasPosition p) {
  switch (p) {
    case DasPosition::kQuery:
      return "query";
    case DasPosition::kYToken:
      return "y-token";
    case DasPosition::kContext:
      return "context";
  }
  return "?";
}

std::string DasStartName(DasStart s) {
  return s == DasStart::kProbe ? "probe" : "random";
}

DasStart ParseDasStart(const std::string& name) {
  for (const DasStart s : {DasStart::kProbe, DasStart::kRandom})
    if (DasStartName(s) == name) return s;
  throw core::InputError("das", "start",
                         "expected probe or random, got '" + name.substr(0, 40) + "'");
}

DasPosition ParseDasPosition(const std::string& s, const std::string& where) {
  for (const DasPosition p : {DasPosition::kQuery, DasPosition::kYToken, DasPosition::kContext})
    if (DasPositionName(p) == s) return p;
  throw core::InputError(where, "position",
                         "expected query, y-token or context, got '" + s.substr(0, 40) + "'");
}

MomentAlgorithm ParseMomentAlgorithm(const std::string& spec, const data::TaskConfig& task) {
  const core::Spec p = core::ParseSpec(spec);
  MomentAlgorithm m;
  const std::string expected =
      "the xty counterfactual needs an algorithm that is a function of X'X and X'y: ols, "
      "ridge:LAMBDA, bayes or gd:ALPHA[:STEPS]; got '" +
      spec.substr(0, 40) + "'";
  if (p.name == "ols" && p.args.empty()) return m;
  if (p.name == "bayes" && p.args.empty()) {
    m.kind = MomentAlgorithm::kRidge;
    m.value = task.BayesLambda();
    return m;
  }
  if (p.name == "ridge" && p.args.size() == 1 && p.Number(0) && *p.Number(0) >= 0 &&
      std::isfinite(*p.Number(0))) {
    m.kind = MomentAlgorithm::kRidge;
    m.value = *p.Number(0);
    return m;
  }
  if (p.name == "gd" && (p.args.size() == 1 || p.args.size() == 2) && p.Number(0) &&
      *p.Number(0) > 0 && std::isfinite(*p.Number(0))) {
    m.kind = MomentAlgorithm::kGd;
    m.value = *p.Number(0);
    if (p.args.size() == 2) {
      const auto s = p.Integer(1, 1, 1000);
      if (!s) throw core::InputError("das", "algorithm", expected);
      m.steps = static_cast<int>(*s);
    }
    return m;
  }
  throw core::InputError("das", "algorithm", expected);
}

namespace {

// The xty counterfactual's weights from X'X (A's) and X'y (B's).
arma::vec MomentWeights(const MomentAlgorithm& alg, const arma::mat& xtx, const arma::vec& xty) {
  const arma::uword d = xty.n_elem;
  switch (alg.kind) {
    case MomentAlgorithm::kOls:
      return arma::solve(xtx, xty);
    case MomentAlgorithm::kRidge:
      return arma::solve(xtx + alg.value * arma::eye(d, d), xty, arma::solve_opts::likely_sympd);
    case MomentAlgorithm::kGd: {
      // w_{t+1} = w_t - 2 alpha (X'X w_t - X'y) from w_0 = 0 (GdLearner's iteration)
      arma::vec w(d, arma::fill::zeros);
      for (int t = 0; t < alg.steps; ++t)
        w -= 2.0 * alg.value * (xtx * w - xty);
      return w;
    }
  }
  return arma::vec(d, arma::fill::zeros);
}

// The smallest k the request's counterfactual is defined at.
int SmallestK(const DasRequest& r, const data::TaskConfig& task) {
  if (r.quantity == "xty" && ParseMomentAlgorithm(r.algorithm, task).kind == MomentAlgorithm::kOls)
    return task.d + 2;
  return 1;
}

void Resolve(DasResult& res, const learners::ModelConfig& mc) {
  const DasRequest& r = res.request;
  const data::TaskConfig& task = res.task;
  // The algorithm first: it decides the k that exist.
  if (r.quantity == "w") {
    const auto learner = learners::MakeLearner(r.algorithm, task, "algorithm");
    if (!learner->is_linear())
      throw core::InputError("das", "algorithm",
                             "'" + r.algorithm.substr(0, 40) +
                                 "' has no weights, so it cannot say what B's weights would do; "
                                 "choose a linear learner (ols, ridge:LAMBDA, bayes, gd:ALPHA, "
                                 "newton:..., sgd:ALPHA)");
  }
  const int k_min = SmallestK(r, task);
  res.ms = r.ms;
  if (res.ms.empty()) {
    std::set<int> m = {1, 2, std::max(1, task.d / 2), task.d, 2 * task.d};
    for (const int v : m)
      if (v <= mc.hidden) res.ms.push_back(v);
  }
  for (const int m : res.ms)
    if (m < 1 || m > mc.hidden)
      throw core::InputError(
          "das", "m",
          fmt::format("subspace size {} is outside 1..{} (the state's width)", m, mc.hidden));
  if (k_min >= task.n && r.ks.empty())
    throw core::InputError(
        "das", "k",
        fmt::format("no k in {}..{}: the {} counterfactual under {} needs k >= "
                    "{}, and an n = {} prompt has queries up to k = {}",
                    k_min, task.n - 1, r.quantity, r.algorithm, k_min, task.n, task.n - 1));
  ResolveLayersAndKs("das", mc, task, r.layers, r.ks, res.layers, res.ks, k_min);
  for (const int k : res.ks) {
    if (k < k_min)
      throw core::InputError(
          "das", "k",
          fmt::format("{} is below d + 2 = {}: OLS's response to B's X'y with A's X'X is off "
                      "every prompt's manifold there (X'X of so few examples is near-singular); "
                      "use k >= {}, or the w counterfactual, or gd/ridge",
                      k, k_min, k_min));
  }
  if (!r.start_basis.empty() &&
      (r.start_basis.n_rows != static_cast<arma::uword>(mc.hidden) || res.ms.size() != 1 ||
       r.start_basis.n_cols != static_cast<arma::uword>(res.ms[0])))
    throw core::InputError("das", "start", "a given start must be H x m for the one m requested");
  for (const NamedSubspace& s : r.subspaces)
    if (s.basis.n_rows != static_cast<arma::uword>(mc.hidden) || s.basis.n_cols < 1)
      throw core::InputError("das", "subspaces",
                             "'" + s.name + "' is not a basis of the state's " +
                                 std::to_string(mc.hidden) + " dimensions");
}

// Keeps the model's parameters out of autograd while DAS trains, and restores them.
class FrozenParameters {
 public:
  explicit FrozenParameters(learners::Transformer& model) {
    for (auto& p : model->parameters()) {
      params_.push_back(p);
      flags_.push_back(p.requires_grad());
      p.set_requires_grad(false);
    }
  }
  ~FrozenParameters() {
    for (std::size_t i = 0; i < params_.size(); ++i)
      params_[i].set_requires_grad(flags_[i]);
  }
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<bool> flags_;
};

// The states of every requested layer's pairs are held at once: refused beyond 8 GB.
void CheckStateMemory(const DasResult& res, int H) {
  const DasRequest& request = res.request;
  const double state_bytes = 2.0 * 4.0 * res.layers.size() *
                             (request.train_pairs + request.test_pairs) * 2.0 * res.task.n * H;
  if (state_bytes > 8e9)
    throw core::InputError("das", "layers",
                           fmt::format("the states of {} layers x {} pairs would take {:.1f} GB; "
                                       "run fewer layers at a time or fewer pairs",
                                       res.layers.size(), request.train_pairs + request.test_pairs,
                                       state_bytes / 1e9));
}

// IIA divides by the spread of t over the test pairs: none at any k (zero, or an algorithm
// that ignores B) leaves nothing to compare, at any number of pairs.
void CheckSpread(const DasRequest& request, const arma::mat& test_t) {
  const arma::rowvec t2 = arma::mean(arma::square(test_t), 0),
                     var = t2 - arma::square(arma::mean(test_t, 0));
  if (NoSpread(arma::accu(var), arma::accu(t2), double(test_t.n_elem)))
    throw core::InputError(
        "das", "algorithm",
        fmt::format("{}'s counterfactual output is the same on every test pair at every k, so "
                    "IIA = 1 - sum (o - t)^2 / sum (t - mean t)^2 is undefined; choose an "
                    "algorithm whose output depends on B's examples",
                    request.algorithm));
}

// The ceiling of the w counterfactual: the model on (B's first k examples, A's x_{k+1}), B's
// prompt with A's x in example k+1 (y_{k+1} and later examples are never read by prediction k).
Iia CeilingIia(learners::Transformer& model, const DasResult& res, const data::PromptSet& test_a,
               const data::PromptSet& test_b, const arma::mat& test_t,
               const probes::Bootstrap& boot) {
  const DasRequest& r = res.request;
  const data::TaskConfig& task = res.task;
  // Every k in one pass: B's examples as the context and A's x_{k+1} as a query at position
  // 2k (QueryForward: each query sees the context before it and itself, as in its own prompt).
  arma::mat own(r.test_pairs, res.ks.size());
  std::vector<std::int64_t> positions;
  for (const int k : res.ks)
    positions.push_back(data::XTokenPos(k));
  const long K = static_cast<long>(res.ks.size());
  for (int first = 0; first < r.test_pairs; first += r.batch) {
    const int cnt = std::min(r.batch, r.test_pairs - first);
    torch::Tensor queries = torch::empty({cnt, K, task.d}, torch::kFloat32);
    auto qa = queries.accessor<float, 3>();
    for (int j = 0; j < cnt; ++j)
      for (long ki = 0; ki < K; ++ki)
        for (int i = 0; i < task.d; ++i)
          qa[j][ki][i] = static_cast<float>(test_a.x(i, res.ks[ki], first + j));
    const torch::Tensor p =
        model->QueryForward(data::TokenTensor(test_b, first, cnt), queries, positions)
            .to(torch::kFloat64)
            .contiguous();  // [cnt, K]
    const auto pa = p.accessor<double, 2>();
    for (long ki = 0; ki < K; ++ki)
      for (int j = 0; j < cnt; ++j)
        own(first + j, ki) = pa[j][ki];
  }
  return PooledIia(own, test_t, boot, nullptr);
}

// Every result of `res` sized for its layers, subspace sizes, k and named subspaces.
void SizeResults(DasResult& res) {
  const std::size_t L = res.layers.size(), M = res.ms.size(), K = res.ks.size(),
                    S = res.subspace_names.size();
  for (arma::mat* x : {&res.iia, &res.iia_lo, &res.iia_hi, &res.random_iia, &res.random_iia_lo,
                       &res.random_iia_hi, &res.epochs})
    x->set_size(L, M);
  res.iia_k.set_size(L, M, K);
  res.random_iia_k.set_size(L, M, K);
  for (arma::vec* x : {&res.none_iia, &res.none_iia_lo, &res.none_iia_hi, &res.full_iia,
                       &res.full_iia_lo, &res.full_iia_hi, &res.probe_r2})
    x->set_size(L);
  res.angle_min.set_size(L, M, S);
  res.angle_max.set_size(L, M, S);
  for (arma::mat* x : {&res.subspace_iia, &res.subspace_iia_lo, &res.subspace_iia_hi})
    x->set_size(L, S);
}

}  // namespace

void DasRequest::Validate() const {
  if (quantity != "w" && quantity != "xty")
    throw core::InputError(
        "das", "quantity",
        "expected w (B's weights) or xty (B's X'y), got '" + quantity.substr(0, 40) + "'");
  if (algorithm.empty())
    throw core::InputError("das", "algorithm", "must name a learner, e.g. ols or gd:0.1");
  if (train_pairs < 2 || train_pairs > 1000000 || test_pairs < 2 || test_pairs > 1000000)
    throw core::InputError("das",
                           train_pairs < 2 || train_pairs > 1000000 ? "train_pairs" : "test_pairs",
                           "must be in 2..1000000");
  if (max_epochs < 1 || max_epochs > 100000)
    throw core::InputError("das", "epochs", "must be in 1..100000");
  if (!(tolerance >= 0) || !std::isfinite(tolerance))
    throw core::InputError("das", "tolerance", "must be a number >= 0");
  if (!(learning_rate > 0) || !std::isfinite(learning_rate))
    throw core::InputError("das", "lr", "must be a positive number");
  if (batch < 1) throw core::InputError("das", "batch", "must be positive");
  if (bootstrap < 1 || bootstrap > 1000000)
    throw core::InputError("das", "bootstrap", "replicates must be in 1..1000000");
  for (const auto* v : {&layers, &ms, &ks})
    if (std::set<int>(v->begin(), v->end()).size() != v->size())
      throw core::InputError("das",
                             v == &layers ? "layers"
                             : v == &ms   ? "m"
                                          : "k",
                             "lists an entry twice");
  for (const NamedSubspace& s : subspaces)
    if (!core::IsPlainName(s.name) || s.name == "probe")
      throw core::InputError("das", "subspaces", "names must be plain and not 'probe'");
}

arma::mat DasTargets(const DasRequest& request, const data::TaskConfig& task,
                     const std::vector<int>& ks, const data::PromptSet& a,
                     const data::PromptSet& b) {
  const arma::uword P = a.x.n_slices;
  arma::mat out(P, ks.size());
  if (request.quantity == "w") {
    const auto learner = learners::MakeLearner(request.algorithm, task, "algorithm");
    learners::LearnerRun run;
    for (arma::uword j = 0; j < P; ++j) {
      learner->Run(b.x.slice(j), b.y.col(j), run);
      for (std::size_t ki = 0; ki < ks.size(); ++ki)
        out(j, ki) = arma::dot(a.x.slice(j).col(ks[ki]), run.weights.col(ks[ki]));
    }
    return out;
  }
  const MomentAlgorithm alg = ParseMomentAlgorithm(request.algorithm, task);
  for (arma::uword j = 0; j < P; ++j)
    for (std::size_t ki = 0; ki < ks.size(); ++ki) {
      const int k = ks[ki];
      const arma::mat xa = a.x.slice(j).head_cols(k);
      const arma::vec xty_b = b.x.slice(j).head_cols(k) * b.y.col(j).head(k);
      out(j, ki) = arma::dot(a.x.slice(j).col(k), MomentWeights(alg, xa * xa.t(), xty_b));
    }
  return out;
}

arma::vec PrincipalAngles(const arma::mat& u, const arma::mat& v) {
  const arma::vec s = arma::svd(u.t() * v);  // descending cosines
  arma::vec deg(s.n_elem);
  for (arma::uword i = 0; i < s.n_elem; ++i)
    deg(i) = std::acos(std::clamp(s(i), -1.0, 1.0)) * 180.0 / arma::datum::pi;
  return deg;
}

DasResult RunDas(learners::Transformer model, const std::string& checkpoint_sha256,
                 const data::TaskConfig& task, const DasRequest& request,
                 const std::function<void(const std::string&)>& progress) {
  request.Validate();
  DasResult res;
  res.request = request;
  res.task = task;
  res.checkpoint_sha256 = checkpoint_sha256;
  Resolve(res, model->config);
  res.subspace_names = {"probe"};
  for (const NamedSubspace& s : request.subspaces)
    res.subspace_names.push_back(s.name);
  const int H = model->config.hidden;
  CheckStateMemory(res, H);
  FrozenParameters frozen(model);
  data::PromptSet train_a, train_b, test_a, test_b;
  std::vector<PairStates> train, test;
  {
    torch::NoGradGuard no_grad;
    if (progress) progress("running the model on the pairs");
    train = CollectStates(model, res, request.seed, request.train_pairs, train_a, train_b);
    test = CollectStates(model, res, request.seed + 1, request.test_pairs, test_a, test_b);
  }
  if (progress) progress("the algorithm's counterfactual outputs");
  const arma::mat train_t = DasTargets(request, task, res.ks, train_a, train_b);
  const arma::mat test_t = DasTargets(request, task, res.ks, test_a, test_b);
  CheckSpread(request, test_t);
  const probes::Bootstrap boot(request.test_pairs, 1, request.bootstrap, request.seed);
  if (request.quantity == "w") {
    torch::NoGradGuard no_grad;
    if (progress) progress("the ceiling: the model on the counterfactual prompts");
    const Iia ceiling = CeilingIia(model, res, test_a, test_b, test_t, boot);
    res.ceiling_iia = ceiling.value, res.ceiling_iia_lo = ceiling.lo,
    res.ceiling_iia_hi = ceiling.hi;
  }
  SizeResults(res);
  const std::size_t L = res.layers.size(), M = res.ms.size(), S = res.subspace_names.size();
  for (std::size_t li = 0; li < L; ++li) {
    const int layer = res.layers[li];
    if (progress)
      progress(
          fmt::format("state {}: the references (no interchange, the whole state, the named "
                      "subspaces) and the probe's directions",
                      layer));
    const Iia none = PooledIia(AllOutputs(model, layer, test[li], res.ks, request.position,
                                          {Interchange::kNone, {}}, request.batch),
                               test_t, boot, nullptr);
    const Iia full = PooledIia(AllOutputs(model, layer, test[li], res.ks, request.position,
                                          {Interchange::kFull, {}}, request.batch),
                               test_t, boot, nullptr);
    res.none_iia(li) = none.value, res.none_iia_lo(li) = none.lo, res.none_iia_hi(li) = none.hi;
    res.full_iia(li) = full.value, res.full_iia_lo(li) = full.lo, res.full_iia_hi(li) = full.hi;
    const auto [probe_basis, probe_r2] = ProbeDirections(res, train[li], train_a);
    const arma::mat support = DifferenceSupport(res, layer, train[li]);
    res.probe_r2(li) = probe_r2;
    for (std::size_t si = 0; si < S; ++si) {
      const arma::mat& b = si == 0 ? probe_basis : request.subspaces[si - 1].basis;
      const Iia own =
          PooledIia(AllOutputs(model, layer, test[li], res.ks, request.position,
                               {Interchange::kSubspace, learners::ToTensor(b)}, request.batch),
                    test_t, boot, nullptr);
      res.subspace_iia(li, si) = own.value, res.subspace_iia_lo(li, si) = own.lo,
                           res.subspace_iia_hi(li, si) = own.hi;
    }
    for (std::size_t mi = 0; mi < M; ++mi) {
      const int m = res.ms[mi];
      auto [basis, epochs] = TrainSubspace(model, res, li, m, support, probe_basis, train[li],
                                           train_t, test[li], test_t, progress);
      res.epochs(li, mi) = epochs;
      arma::vec per_k;
      const Iia learned =
          PooledIia(AllOutputs(model, layer, test[li], res.ks, request.position,
                               {Interchange::kSubspace, learners::ToTensor(basis)}, request.batch),
                    test_t, boot, &per_k);
      res.iia(li, mi) = learned.value, res.iia_lo(li, mi) = learned.lo,
                  res.iia_hi(li, mi) = learned.hi;
      res.iia_k.tube(li, mi) = per_k;
      const arma::mat random =
          data::RandomOrthonormal(H, m, request.seed, 0x7a4d000ULL + 1000ULL * layer + m);
      const Iia rnd =
          PooledIia(AllOutputs(model, layer, test[li], res.ks, request.position,
                               {Interchange::kSubspace, learners::ToTensor(random)}, request.batch),
                    test_t, boot, &per_k);
      res.random_iia(li, mi) = rnd.value, res.random_iia_lo(li, mi) = rnd.lo,
                         res.random_iia_hi(li, mi) = rnd.hi;
      res.random_iia_k.tube(li, mi) = per_k;
      for (std::size_t si = 0; si < S; ++si) {
        const arma::vec ang =
            PrincipalAngles(basis, si == 0 ? probe_basis : request.subspaces[si - 1].basis);
        res.angle_min(li, mi, si) = ang.empty() ? 90.0 : ang.min();
        res.angle_max(li, mi, si) = ang.empty() ? 90.0 : ang.max();
      }
      res.bases.push_back(std::move(basis));
    }
  }
  return res;
}

}  // namespace icl::intervene
