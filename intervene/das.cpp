// Distributed alignment search and the DAS file (das.hpp).
#include "intervene/das.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/names.hpp"
#include "core/spec.hpp"
#include "data/prompt_io.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "intervene/file_common.hpp"
#include "intervene/intervene.hpp"
#include "learners/arma_torch.hpp"
#include "learners/classical.hpp"
#include "probes/uncertainty.hpp"

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

namespace {

DasPosition ParseDasPosition(const std::string& s, const std::string& where) {
  for (const DasPosition p : {DasPosition::kQuery, DasPosition::kYToken, DasPosition::kContext})
    if (DasPositionName(p) == s) return p;
  throw core::InputError(where, "position",
                         "expected query, y-token or context, got '" + s.substr(0, 40) + "'");
}

// An algorithm that is a function of X'X and X'y (the xty counterfactual).
struct MomentAlgorithm {
  enum Kind { kOls, kRidge, kGd } kind = kOls;
  double value = 0;  // lambda or alpha
  int steps = 1;
};

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

// The positions [begin, end) interchanged for k examples.
std::pair<int, int> Positions(DasPosition p, int k) {
  switch (p) {
    case DasPosition::kQuery:
      return {data::XTokenPos(k), data::XTokenPos(k) + 1};
    case DasPosition::kYToken:
      return {data::AfterKPos(k), data::AfterKPos(k) + 1};
    case DasPosition::kContext:
      return {0, data::XTokenPos(k)};
  }
  return {0, 0};
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

// The states of one layer for a set of pairs: A's and B's, [P, 2n, H].
struct PairStates {
  torch::Tensor a, b;
  // At the query position: A's states layer..L-1 (shared between layers, not copies), so that
  // only the query's row runs on after the interchange (TransformerImpl::QueriesFrom).
  std::vector<torch::Tensor> context;
};

// Per requested layer, the states of `count` pairs of the stream `seed`, in batches.
std::vector<PairStates> CollectStates(learners::Transformer& model, const DasResult& res,
                                      std::uint64_t seed, int count, data::PromptSet& a_all,
                                      data::PromptSet& b_all) {
  SamplePairs(res.task, seed, 0, count, a_all, b_all);
  const int L = model->config.layers;
  const bool query = res.request.position == DasPosition::kQuery;
  // A's states at every layer when the query alone runs on, else at the requested layers.
  std::vector<std::vector<torch::Tensor>> pa(L + 1), pb(res.layers.size());
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  for (int first = 0; first < count; first += res.request.batch) {
    const int cnt = std::min(res.request.batch, count - first);
    const learners::ForwardResult ra = model->Run(data::TokenTensor(a_all, first, cnt), fo);
    const learners::ForwardResult rb = model->Run(data::TokenTensor(b_all, first, cnt), fo);
    for (int j = 0; j <= L; ++j)
      if (query || std::count(res.layers.begin(), res.layers.end(), j) > 0)
        pa[j].push_back(ra.hidden[j]);
    for (std::size_t li = 0; li < res.layers.size(); ++li)
      pb[li].push_back(rb.hidden[res.layers[li]]);
  }
  std::vector<torch::Tensor> a_states(L + 1);
  for (int j = 0; j <= L; ++j)
    if (!pa[j].empty()) a_states[j] = torch::cat(pa[j]);
  std::vector<PairStates> out(res.layers.size());
  for (std::size_t li = 0; li < res.layers.size(); ++li) {
    const int layer = res.layers[li];
    out[li] = {a_states[layer], torch::cat(pb[li]), {}};
    if (query) out[li].context.assign(a_states.begin() + layer, a_states.begin() + L);
  }
  return out;
}

// How the interchange is made: along a subspace (H x m, orthonormal columns), of the whole state
// at the positions, or not at all.
struct Interchange {
  enum Kind { kSubspace, kFull, kNone, kLinear } kind = kSubspace;
  torch::Tensor basis;  // kSubspace: H x m; kLinear: any H x H map Pr, h_A + Pr (h_B - h_A)
};

// The model's prediction k at A's query for the pairs `idx`, with the interchange made at
// `layer` (the sequences cut after the query: later positions cannot reach it).
torch::Tensor InterchangeOutputs(learners::Transformer& model, int layer, const PairStates& s,
                                 const torch::Tensor& idx, int k, DasPosition position,
                                 const Interchange& how) {
  using torch::indexing::Slice;
  if (position == DasPosition::kQuery && !s.context.empty()) {
    // Only the query's row changes, and nothing before it depends on it: run it alone against
    // A's context states (QueriesFrom; equal to the whole prefix run on up to float32 order).
    const int p = data::XTokenPos(k);
    const torch::Tensor a_q = s.a.index_select(0, idx).select(1, p);
    torch::Tensor q = a_q;
    if (how.kind != Interchange::kNone) {
      const torch::Tensor b_q = s.b.index_select(0, idx).select(1, p);
      q = how.kind == Interchange::kFull ? b_q
          : how.kind == Interchange::kLinear
              ? a_q + torch::matmul(b_q - a_q, how.basis.t())
              : a_q + torch::matmul(torch::matmul(b_q - a_q, how.basis), how.basis.t());
    }
    std::vector<torch::Tensor> context;
    for (const torch::Tensor& c : s.context)
      context.push_back(c.index_select(0, idx).slice(1, 0, p));
    return model->QueriesFrom(layer, context, q.unsqueeze(1), {p}).select(1, 0);
  }
  const int end = data::XTokenPos(k) + 1;
  const torch::Tensor a = s.a.index_select(0, idx).slice(1, 0, end);
  torch::Tensor edited = a;
  if (how.kind != Interchange::kNone) {
    const auto [p0, p1] = Positions(position, k);
    const torch::Tensor a_pos = a.slice(1, p0, p1);
    const torch::Tensor b_pos = s.b.index_select(0, idx).slice(1, p0, p1);
    // Rows are states: h' = h_A + U U' (h_B - h_A) is a_pos + (b_pos - a_pos) U U'.
    const torch::Tensor swapped =
        how.kind == Interchange::kFull ? b_pos
        : how.kind == Interchange::kLinear
            ? a_pos + torch::matmul(b_pos - a_pos, how.basis.t())
            : a_pos + torch::matmul(torch::matmul(b_pos - a_pos, how.basis), how.basis.t());
    edited = torch::cat({a.slice(1, 0, p0), swapped, a.slice(1, p1, end)}, /*dim=*/1);
  }
  return model->RunFrom(layer, edited).select(1, k);
}

// The outputs of every pair at every k (P x K, float64), without gradients.
arma::mat AllOutputs(learners::Transformer& model, int layer, const PairStates& s,
                     const std::vector<int>& ks, DasPosition position, const Interchange& how,
                     int batch) {
  torch::NoGradGuard no_grad;
  const long P = s.a.size(0);
  arma::mat out(P, ks.size());
  for (std::size_t ki = 0; ki < ks.size(); ++ki)
    for (long first = 0; first < P; first += batch) {
      const long cnt = std::min<long>(batch, P - first);
      const torch::Tensor idx = torch::arange(first, first + cnt, torch::kLong);
      const torch::Tensor o =
          InterchangeOutputs(model, layer, s, idx, ks[ki], position, how).to(torch::kFloat64);
      std::copy(o.data_ptr<double>(), o.data_ptr<double>() + cnt, out.colptr(ki) + first);
    }
  return out;
}

struct Iia {
  double value = 0, lo = 0, hi = 0;
};

// IIA per k (1 - sum (o - t)^2 / sum (t - mean t)^2 over pairs) and pooled over k, with bootstrap
// intervals over pairs for the pooled one (das.hpp).
Iia PooledIia(const arma::mat& o, const arma::mat& t, const probes::Bootstrap& boot,
              arma::vec* per_k) {
  const arma::uword K = t.n_cols;
  const int B = boot.replicates();
  arma::vec num(B, arma::fill::zeros), den(B, arma::fill::zeros), scale(B, arma::fill::zeros);
  double pn = 0, pd = 0;
  if (per_k) per_k->set_size(K);
  for (arma::uword ki = 0; ki < K; ++ki) {
    const arma::vec e2 = arma::square(o.col(ki) - t.col(ki)), tt = t.col(ki);
    const double var = arma::mean(arma::square(tt)) - std::pow(arma::mean(tt), 2);
    pn += arma::mean(e2), pd += var;
    if (per_k) (*per_k)(ki) = var > 0 ? 1.0 - arma::mean(e2) / var : 0.0;
    num += boot.Mean(0, e2);
    const arma::vec b_t2 = boot.Mean(0, arma::square(tt));
    den += b_t2 - arma::square(boot.Mean(0, tt));
    scale += b_t2;
  }
  Iia r;
  r.value = pd > 0 ? 1.0 - pn / pd : 0.0;
  // A resample without spread in t (few pairs) has no IIA: the interval is undefined (NaN).
  const double terms = double(t.n_rows) * double(K);
  const probes::Interval iv = probes::PercentileInterval(1.0 - SpreadRatio(num, den, scale, terms));
  r.lo = iv.lo, r.hi = iv.hi;
  return r;
}

// The quantity's own value in A at each k of `ks` (the ridge probe's target): X'y or w; one
// P x d matrix per k (the learner runs once per prompt, for every k).
std::vector<arma::mat> ProbeTargets(const DasRequest& r, const data::TaskConfig& task,
                                    const std::vector<int>& ks, const data::PromptSet& a) {
  const arma::uword P = a.x.n_slices;
  std::vector<arma::mat> out(ks.size(), arma::mat(P, task.d));
  std::unique_ptr<learners::ClassicalLearner> learner;
  if (r.quantity == "w") learner = learners::MakeLearner(r.algorithm, task, "algorithm");
  learners::LearnerRun run;
  for (arma::uword j = 0; j < P; ++j) {
    if (learner) learner->Run(a.x.slice(j), a.y.col(j), run);
    for (std::size_t ki = 0; ki < ks.size(); ++ki) {
      const int k = ks[ki];
      if (learner)
        out[ki].row(j) = run.weights.col(k).t();
      else
        out[ki].row(j) = (a.x.slice(j).head_cols(k) * a.y.col(j).head(k)).t();
    }
  }
  return out;
}

// A ridge probe of the quantity from the states at the interchanged positions (the last one
// of each k's set), pooled over k with each k centred: an orthonormal basis of its directions
// (H x d) and its R2 on the pairs it was fitted on.
std::pair<arma::mat, double> ProbeDirections(const DasResult& res, const PairStates& s,
                                             const data::PromptSet& a) {
  const int H = static_cast<int>(s.a.size(2));
  arma::mat xtx(H, H, arma::fill::zeros), xty(H, res.task.d, arma::fill::zeros);
  std::vector<arma::mat> feats, targets;
  std::vector<arma::mat> targets_k = ProbeTargets(res.request, res.task, res.ks, a);
  double sst = 0;
  for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
    const int p = Positions(res.request.position, res.ks[ki]).second - 1;
    arma::mat f = learners::ToArma(s.a.select(1, p));  // P x H
    arma::mat t = std::move(targets_k[ki]);
    f.each_row() -= arma::mean(f, 0);
    t.each_row() -= arma::mean(t, 0);
    xtx += f.t() * f;
    xty += f.t() * t;
    sst += arma::accu(arma::square(t));
    feats.push_back(std::move(f));
    targets.push_back(std::move(t));
  }
  // A ridge of 1e-6 of the mean eigenvalue: the least-squares directions where the states span
  // the quantity, finite where they are rank-deficient (LayerNorm, constructions' empty rows).
  const double ridge = 1e-6 * std::max(arma::trace(xtx) / H, 1e-300);
  const arma::mat w =
      arma::solve(xtx + ridge * arma::eye(H, H), xty, arma::solve_opts::likely_sympd);
  double sse = 0;
  for (std::size_t ki = 0; ki < feats.size(); ++ki)
    sse += arma::accu(arma::square(feats[ki] * w - targets[ki]));
  return {arma::orth(w), sst > 0 ? 1.0 - sse / sst : 0.0};
}

// An orthonormal basis (H x D) of the span of the differences h_B - h_A at the interchanged
// positions over the training pairs and k: directions where every pair agrees (a construction's
// position and count rows, rows zero at those positions) are no-ops for any interchange, so
// DAS cannot place its subspace there or away from them; it searches within this span. The
// rank counts eigenvalues of the differences' second moment above 1e-10 of the largest (float32
// states that differ do so by far more; rows equal in A and B differ by exactly 0).
arma::mat DifferenceSupport(const DasResult& res, int layer, const PairStates& s) {
  const long H = s.a.size(2);
  arma::mat second(H, H, arma::fill::zeros);
  for (const int k : res.ks) {
    const auto [p0, p1] = Positions(res.request.position, k);
    const torch::Tensor d =
        (s.b.slice(1, p0, p1) - s.a.slice(1, p0, p1)).reshape({-1, H}).to(torch::kFloat64);
    const arma::mat dm = learners::ToArma(d);  // rows: differences
    second += dm.t() * dm;
  }
  arma::vec val;
  arma::mat vec;
  arma::eig_sym(val, vec, second);
  const double top = val.empty() ? 0.0 : val.max();
  const arma::uvec keep = arma::find(val > 1e-10 * top);
  if (!(top > 0))
    throw std::runtime_error(fmt::format(
        "das: the states of A and B at state {} never differ at the interchanged positions; "
        "there is nothing to interchange",
        layer));
  return vec.cols(keep);
}

// Learning-rate halvings on plateaus before DAS stops (TrainSubspace).
constexpr int kHalvings = 2;

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

// Learns the m-dimensional subspace of one layer: R = exp(S - S') R0 (orthogonal for every S; R0
// the start, DasStart), the subspace V R's first m columns (V the differences' support); Adam on
// S, each batch one k, to the mean of sqrt(1 + (o - t)^2 / var_k t) - 1: zero at a perfect
// interchange, quadratic near it, and with a bounded gradient where a subspace mixes large
// quantities into rows a later product reads (an MSE there is dominated by a few exploding
// pairs, and the steps follow them off the solution).
// After every epoch the IIA on held-out pairs (the test pairs at k = ks[p mod K]); an epoch that
// gains less than the tolerance halves the learning rate from the best subspace so far, and
// after kHalvings such epochs the training stops. Returns the best basis and the epochs run.
std::pair<arma::mat, int> TrainSubspace(learners::Transformer& model, const DasResult& res,
                                        std::size_t li, int m, const arma::mat& support,
                                        const arma::mat& probe, const PairStates& train,
                                        const arma::mat& train_t, const PairStates& test,
                                        const arma::mat& test_t,
                                        const std::function<void(const std::string&)>& progress) {
  const DasRequest& r = res.request;
  const int layer = res.layers[li];
  const int H = static_cast<int>(train.a.size(2));
  const std::size_t K = res.ks.size();
  const std::uint64_t stream = 0xda5000ULL + 1000ULL * static_cast<std::uint64_t>(layer) + m;
  arma::vec var_k(K);
  for (std::size_t ki = 0; ki < K; ++ki)
    var_k(ki) = std::max(arma::var(train_t.col(ki)), 1e-12);
  const long P = train.a.size(0), Q = test.a.size(0);
  // The search runs inside the support of the differences (rank D): R is D x D, the subspace
  // V R's first m columns.
  const int D = static_cast<int>(support.n_cols);
  if (m >= D) {  // the whole support: nothing to learn, every interchange there is the full one
    arma::mat q, rr;
    arma::qr_econ(q, rr,
                  arma::join_rows(support, data::RandomOrthonormal(H, m - D, r.seed, stream)));
    return {q.head_cols(m), 0};
  }
  const torch::Tensor v = learners::ToTensor(support);
  arma::mat r0m = data::RandomOrthonormal(D, D, r.seed, stream);
  if (!r.start_basis.empty()) {
    arma::mat q, rr;
    arma::qr(q, rr, arma::join_rows(support.t() * r.start_basis, r0m));
    r0m = q.head_cols(D);
  } else if (r.start == DasStart::kProbe) {
    // The probe's directions (inside the support) first, then random ones: R0's first m columns
    // span the probe's first m directions (all of them and random ones when m > their number).
    arma::mat q, rr;
    arma::qr(q, rr, arma::join_rows(support.t() * probe, r0m));
    r0m = q.head_cols(D);
  }
  const torch::Tensor r0 = learners::ToTensor(r0m);
  torch::Tensor s = torch::zeros({D, D}, torch::kFloat32).set_requires_grad(true);
  auto adam = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{s},
                                                   torch::optim::AdamOptions(r.learning_rate));
  const auto basis = [&]() {
    return torch::matmul(v, torch::matmul(torch::matrix_exp(s - s.t()), r0).slice(1, 0, m));
  };
  const auto held_out = [&]() {
    torch::NoGradGuard no_grad;
    const Interchange how{Interchange::kSubspace, basis().detach()};
    double num = 0, den = 0;
    for (std::size_t ki = 0; ki < K; ++ki) {
      std::vector<long> ids;
      for (long q = static_cast<long>(ki); q < Q; q += static_cast<long>(K))
        ids.push_back(q);
      if (ids.empty()) continue;
      arma::vec o(ids.size()), t(ids.size());
      for (std::size_t first = 0; first < ids.size(); first += r.batch) {
        const std::size_t cnt = std::min<std::size_t>(r.batch, ids.size() - first);
        const torch::Tensor idx =
            torch::from_blob(ids.data() + first, {static_cast<long>(cnt)}, torch::kLong).clone();
        const torch::Tensor out =
            InterchangeOutputs(model, layer, test, idx, res.ks[ki], r.position, how)
                .to(torch::kFloat64);
        for (std::size_t j = 0; j < cnt; ++j)
          o(first + j) = out.data_ptr<double>()[j], t(first + j) = test_t(ids[first + j], ki);
      }
      num += arma::accu(arma::square(o - t));
      den += arma::accu(arma::square(t - arma::mean(t)));
    }
    return den > 0 ? 1.0 - num / den : 0.0;
  };
  data::Rng rng(r.seed, stream + 0x5ULL);
  std::vector<long> order(P);
  double best = held_out();
  torch::Tensor best_s = s.detach().clone();
  double lr = r.learning_rate;
  int epoch = 0, halvings = 0;
  while (epoch < r.max_epochs) {
    ++epoch;
    std::iota(order.begin(), order.end(), 0L);
    for (long i = P - 1; i > 0; --i)
      std::swap(order[i], order[static_cast<long>(rng.Uniform() * (i + 1))]);
    for (long first = 0; first < P; first += r.batch) {
      const long cnt = std::min<long>(r.batch, P - first);
      const std::size_t ki =
          std::min<std::size_t>(static_cast<std::size_t>(rng.Uniform() * K), K - 1);
      const torch::Tensor idx = torch::from_blob(order.data() + first, {cnt}, torch::kLong).clone();
      arma::vec t(cnt);
      for (long j = 0; j < cnt; ++j)
        t(j) = train_t(order[first + j], ki);
      const torch::Tensor target = learners::ToTensor(t).view({cnt});
      const torch::Tensor out = InterchangeOutputs(model, layer, train, idx, res.ks[ki], r.position,
                                                   {Interchange::kSubspace, basis()});
      const torch::Tensor loss = (torch::sqrt(1 + (out - target).square() / var_k(ki)) - 1).mean();
      adam->zero_grad();
      loss.backward();
      adam->step();
    }
    const double iia = held_out();
    if (progress)
      progress(
          fmt::format("state {}, m = {}: epoch {}, held-out IIA {:.4f}", layer, m, epoch, iia));
    if (iia > best + r.tolerance) {
      best = iia;
      best_s = s.detach().clone();
      continue;
    }
    if (iia > best) best = iia, best_s = s.detach().clone();
    // A plateau: from the best subspace so far with half the step, until kHalvings halvings
    // have not helped.
    if (++halvings > kHalvings) break;
    lr *= 0.5;
    {
      torch::NoGradGuard no_grad;
      s.copy_(best_s);
    }
    adam = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{s},
                                                torch::optim::AdamOptions(lr));
  }
  {
    torch::NoGradGuard no_grad;
    s.copy_(best_s);
  }
  const arma::mat best_basis = learners::ToArma(basis().detach());
  // Re-orthonormalised in float64 (the float32 exponential leaves errors ~H eps): the same span.
  arma::mat q, rr;
  arma::qr_econ(q, rr, best_basis);
  return {q, epoch};
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
  const double state_bytes =
      2.0 * 4.0 * res.layers.size() * (request.train_pairs + request.test_pairs) * 2.0 * task.n * H;
  if (state_bytes > 8e9)
    throw core::InputError("das", "layers",
                           fmt::format("the states of {} layers x {} pairs would take {:.1f} GB; "
                                       "run fewer layers at a time or fewer pairs",
                                       res.layers.size(), request.train_pairs + request.test_pairs,
                                       state_bytes / 1e9));
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
  {
    // IIA divides by the spread of t over the test pairs: none at any k (zero, or an algorithm
    // that ignores B) leaves nothing to compare, at any number of pairs.
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
  const probes::Bootstrap boot(request.test_pairs, 1, request.bootstrap, request.seed);
  if (request.quantity == "w") {
    // The model on (B's first k examples, A's x_{k+1}): B's prompt with A's x in example k+1
    // (y_{k+1} and later examples are never read by prediction k).
    torch::NoGradGuard no_grad;
    if (progress) progress("the ceiling: the model on the counterfactual prompts");
    // Every k in one pass: B's examples as the context and A's x_{k+1} as a query at position
    // 2k (QueryForward: each query sees the context before it and itself, as in its own prompt).
    arma::mat own(request.test_pairs, res.ks.size());
    std::vector<std::int64_t> positions;
    for (const int k : res.ks)
      positions.push_back(data::XTokenPos(k));
    const long K = static_cast<long>(res.ks.size());
    for (int first = 0; first < request.test_pairs; first += request.batch) {
      const int cnt = std::min(request.batch, request.test_pairs - first);
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
    const Iia ceiling = PooledIia(own, test_t, boot, nullptr);
    res.ceiling_iia = ceiling.value, res.ceiling_iia_lo = ceiling.lo,
    res.ceiling_iia_hi = ceiling.hi;
  }
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

namespace {

constexpr const char* kPerLayerM[] = {"iia",           "iia_lo",        "iia_hi", "random_iia",
                                      "random_iia_lo", "random_iia_hi", "epochs"};
constexpr const char* kPerLayer[] = {"none_iia",    "none_iia_lo", "none_iia_hi", "full_iia",
                                     "full_iia_lo", "full_iia_hi", "probe_r2"};
constexpr const char* kPerSubspace[] = {"subspace_iia", "subspace_iia_lo", "subspace_iia_hi"};
template <typename R>
auto& PerLayerM(R& r, int i) {
  return *std::array{&r.iia,           &r.iia_lo,        &r.iia_hi, &r.random_iia,
                     &r.random_iia_lo, &r.random_iia_hi, &r.epochs}[i];
}
template <typename R>
auto& PerLayer(R& r, int i) {
  return *std::array{&r.none_iia,    &r.none_iia_lo, &r.none_iia_hi, &r.full_iia,
                     &r.full_iia_lo, &r.full_iia_hi, &r.probe_r2}[i];
}

// mat (rows L, cols M) <-> [L, M] row-major.
std::vector<double> RowMajor(const arma::mat& m) {
  const arma::mat t = m.t();
  return std::vector<double>(t.memptr(), t.memptr() + t.n_elem);
}
// cube (rows L, cols M, slices X) <-> [L, M, X] row-major.
std::vector<double> RowMajor(const arma::cube& c) {
  std::vector<double> v;
  v.reserve(c.n_elem);
  for (arma::uword i = 0; i < c.n_rows; ++i)
    for (arma::uword j = 0; j < c.n_cols; ++j)
      for (arma::uword s = 0; s < c.n_slices; ++s)
        v.push_back(c(i, j, s));
  return v;
}
arma::cube CubeOf(const std::vector<double>& v, arma::uword L, arma::uword M, arma::uword X) {
  arma::cube c(L, M, X);
  std::size_t n = 0;
  for (arma::uword i = 0; i < L; ++i)
    for (arma::uword j = 0; j < M; ++j)
      for (arma::uword s = 0; s < X; ++s)
        c(i, j, s) = v[n++];
  return c;
}

std::string BasisName(int layer, int m) {
  return fmt::format("state_{}_m_{}", layer, m);
}

}  // namespace

void WriteDasFile(const std::string& path, const DasResult& res) {
  const hsize_t L = res.layers.size(), M = res.ms.size(), K = res.ks.size(),
                S = res.subspace_names.size();
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  data::WriteFormatAttrs(f, kDasFormat);
  const DasRequest& r = res.request;
  f.SetAttr("checkpoint", res.checkpoint);
  f.SetAttr("checkpoint_sha256", res.checkpoint_sha256);
  f.SetAttr("quantity", r.quantity);
  f.SetAttr("algorithm", r.algorithm);
  f.SetAttr("position", DasPositionName(r.position));
  f.SetAttr("start", DasStartName(r.start));
  f.SetAttr("seed", static_cast<std::int64_t>(r.seed));
  f.SetAttr("train_pairs", r.train_pairs);
  f.SetAttr("test_pairs", r.test_pairs);
  f.SetAttr("max_epochs", r.max_epochs);
  f.SetAttr("tolerance", r.tolerance);
  f.SetAttr("learning_rate", r.learning_rate);
  f.SetAttr("batch", r.batch);
  f.SetAttr("bootstrap_replicates", r.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", std::vector<std::int64_t>(res.layers.begin(), res.layers.end()));
  f.SetAttr("ms", std::vector<std::int64_t>(res.ms.begin(), res.ms.end()));
  f.SetAttr("ks", std::vector<std::int64_t>(res.ks.begin(), res.ks.end()));
  f.SetAttr("subspaces", res.subspace_names);
  f.SetAttr("rule",
            std::string("A's state at the positions becomes h_A + U U' (h_B - h_A), U the learned "
                        "H x m basis (R = exp(S - S') R0, its first m columns; Adam on the mean "
                        "of (o - t)^2 / var_k t); IIA = 1 - sum (o - t)^2 / sum (t - mean_k t)^2 "
                        "over held-out pairs (stream seed + 1) and k, 95% percentile bootstrap "
                        "over pairs; random: a random U of the same m; none: no interchange; "
                        "full: the whole state at the positions; angles in degrees"));
  for (int i = 0; i < 7; ++i) {
    const std::vector<double> v = RowMajor(PerLayerM(res, i));
    f.CreateDataset<double>(kPerLayerM[i], {L, M}, {"layer", "m"}).Write(v.data(), v.size());
  }
  for (int i = 0; i < 7; ++i) {
    const arma::vec& v = PerLayer(res, i);
    f.CreateDataset<double>(kPerLayer[i], {L}, {"layer"}).Write(v.memptr(), v.n_elem);
  }
  const std::vector<double> ik = RowMajor(res.iia_k), rk = RowMajor(res.random_iia_k),
                            amin = RowMajor(res.angle_min), amax = RowMajor(res.angle_max);
  f.CreateDataset<double>("iia_k", {L, M, K}, {"layer", "m", "k"}).Write(ik.data(), ik.size());
  f.CreateDataset<double>("random_iia_k", {L, M, K}, {"layer", "m", "k"})
      .Write(rk.data(), rk.size());
  f.CreateDataset<double>("angle_min", {L, M, S}, {"layer", "m", "subspace"})
      .Write(amin.data(), amin.size());
  f.CreateDataset<double>("angle_max", {L, M, S}, {"layer", "m", "subspace"})
      .Write(amax.data(), amax.size());
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> v =
        RowMajor(*std::array{&res.subspace_iia, &res.subspace_iia_lo, &res.subspace_iia_hi}[i]);
    f.CreateDataset<double>(kPerSubspace[i], {L, S}, {"layer", "subspace"})
        .Write(v.data(), v.size());
  }
  if (r.quantity == "w")
    for (const auto& [name, v] : {std::pair<const char*, double>{"ceiling_iia", res.ceiling_iia},
                                  {"ceiling_iia_lo", res.ceiling_iia_lo},
                                  {"ceiling_iia_hi", res.ceiling_iia_hi}})
      f.CreateDataset<double>(name, {1}).Write(&v, 1);
  for (const auto* names : {&kPerLayerM, &kPerLayer})
    for (const char* name : *names)
      if (IsIntervalBound(name)) f.OpenDataset(name).SetAttr("undefined", kUndefinedBound);
  for (const char* name :
       {"subspace_iia_lo", "subspace_iia_hi", "ceiling_iia_lo", "ceiling_iia_hi"})
    if (f.Exists(name)) f.OpenDataset(name).SetAttr("undefined", kUndefinedBound);
  h5::Group g = f.CreateGroup("bases");
  for (std::size_t li = 0; li < L; ++li)
    for (std::size_t mi = 0; mi < M; ++mi) {
      const arma::mat& b = res.bases[li * M + mi];
      // H x m column-major is [m, H] row-major: row i is basis vector i.
      g.CreateDataset<double>(BasisName(res.layers[li], res.ms[mi]), {b.n_cols, b.n_rows},
                              {"basis_vector", "hidden"})
          .Write(b.memptr(), b.n_elem);
    }
}

DasResult ReadDasFile(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kDasFormat);
  const std::string where = "'" + path + "'";
  DasResult res;
  DasRequest& r = res.request;
  res.checkpoint = f.GetString("checkpoint");
  res.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  r.quantity = f.GetString("quantity");
  r.algorithm = f.GetString("algorithm");
  r.position = ParseDasPosition(f.GetString("position"), where);
  const std::string start = f.GetString("start");
  if (start != "probe" && start != "random")
    throw core::InputError(where, "", "attribute 'start' must be probe or random");
  r.start = start == "probe" ? DasStart::kProbe : DasStart::kRandom;
  res.task = data::TaskConfig::FromJson(f.GetString("task_config"), where + " task_config");
  r.seed = static_cast<std::uint64_t>(f.GetInt("seed"));
  const auto small_int = [&](const char* name) {
    const std::int64_t v = f.GetInt(name);
    if (v < 0 || v > 100000000)
      throw core::InputError(where, "", std::string("attribute '") + name + "' is out of range");
    return static_cast<int>(v);
  };
  r.train_pairs = small_int("train_pairs");
  r.test_pairs = small_int("test_pairs");
  r.max_epochs = small_int("max_epochs");
  r.batch = small_int("batch");
  r.bootstrap = small_int("bootstrap_replicates");
  r.tolerance = f.GetDouble("tolerance");
  r.learning_rate = f.GetDouble("learning_rate");
  try {
    r.Validate();
    if (r.quantity == "xty")
      ParseMomentAlgorithm(r.algorithm, res.task);
    else
      learners::MakeLearner(r.algorithm, res.task, "algorithm");
  } catch (const core::InputError& e) {
    throw core::InputError(where, "", "attribute '" + e.field() + "': " + e.text());
  }
  ReadLayersAndKs(f, where, res.task, res.layers, res.ks);
  std::vector<std::int64_t> ms = f.GetIntList("ms");
  if (ms.empty() || ms.size() > 4096)
    throw core::InputError(where, "", "attribute 'ms' must hold 1..4096 sizes");
  for (const std::int64_t m : ms) {
    if (m < 1 || m > 1000000)
      throw core::InputError(where, "", "attribute 'ms' holds " + std::to_string(m));
    res.ms.push_back(static_cast<int>(m));
  }
  if (std::set<int>(res.ms.begin(), res.ms.end()).size() != res.ms.size())
    throw core::InputError(where, "", "attribute 'ms' lists a size twice");
  res.subspace_names = f.GetStringList("subspaces");
  if (res.subspace_names.empty() || res.subspace_names.size() > 64 ||
      res.subspace_names[0] != "probe" ||
      std::set<std::string>(res.subspace_names.begin(), res.subspace_names.end()).size() !=
          res.subspace_names.size())
    throw core::InputError(where, "",
                           "attribute 'subspaces' must hold 1..64 distinct names, 'probe' first");
  for (const std::string& s : res.subspace_names)
    if (!core::IsPlainName(s))
      throw core::InputError(where, "", "attribute 'subspaces' holds a name that is not plain");
  const hsize_t L = res.layers.size(), M = res.ms.size(), K = res.ks.size(),
                S = res.subspace_names.size();
  const auto read = [&](const char* name, const h5::Dims& dims) {
    return IsIntervalBound(name) ? ReadBound(f, where, name, dims)
                                 : ReadFinite(f, where, name, dims);
  };
  for (int i = 0; i < 7; ++i) {
    const std::vector<double> v = read(kPerLayerM[i], {L, M});
    PerLayerM(res, i) = arma::mat(v.data(), M, L).t();
  }
  for (int i = 0; i < 7; ++i)
    PerLayer(res, i) = arma::vec(read(kPerLayer[i], {L}));
  res.iia_k = CubeOf(read("iia_k", {L, M, K}), L, M, K);
  res.random_iia_k = CubeOf(read("random_iia_k", {L, M, K}), L, M, K);
  res.angle_min = CubeOf(read("angle_min", {L, M, S}), L, M, S);
  res.angle_max = CubeOf(read("angle_max", {L, M, S}), L, M, S);
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> v = read(kPerSubspace[i], {L, S});
    *std::array{&res.subspace_iia, &res.subspace_iia_lo, &res.subspace_iia_hi}[i] =
        arma::mat(v.data(), S, L).t();
  }
  if (r.quantity == "w") {
    res.ceiling_iia = read("ceiling_iia", {1})[0];
    res.ceiling_iia_lo = read("ceiling_iia_lo", {1})[0];
    res.ceiling_iia_hi = read("ceiling_iia_hi", {1})[0];
  }
  const h5::Dataset any = f.OpenDataset("bases/" + BasisName(res.layers[0], res.ms[0]));
  const h5::Dims dims0 = any.dims();
  if (dims0.size() != 2 || dims0[1] < 1 || dims0[1] > 65536)
    throw core::InputError(where, "", "/bases datasets must be [m, H] with H in 1..65536");
  const hsize_t H = dims0[1];
  for (std::size_t li = 0; li < L; ++li)
    for (std::size_t mi = 0; mi < M; ++mi) {
      const std::string name = "bases/" + BasisName(res.layers[li], res.ms[mi]);
      if (static_cast<hsize_t>(res.ms[mi]) > H)
        throw core::InputError(
            where, "", "m = " + std::to_string(res.ms[mi]) + " is larger than the bases' width");
      const std::vector<double> v = read(name.c_str(), {static_cast<hsize_t>(res.ms[mi]), H});
      arma::mat b(v.data(), H, res.ms[mi]);
      // Written orthonormal to float64 rounding (QR): sqrt(H) eps per entry, far below 1e-9.
      if (arma::abs(b.t() * b - arma::eye(b.n_cols, b.n_cols)).max() > 1e-9)
        throw core::InputError(where, "", "/" + name + " is not an orthonormal basis");
      res.bases.push_back(std::move(b));
    }
  return res;
}

void WriteDasCsv(std::ostream& os, const DasResult& res) {
  os << "quantity,algorithm,position,layer,m,k,test_pairs,iia,iia_lo,iia_hi,random_iia,"
        "random_iia_lo,random_iia_hi,none_iia,full_iia,epochs,probe_r2,ceiling_iia";
  for (const std::string& s : res.subspace_names)
    os << ",angle_max_" << s << ",angle_min_" << s;
  os << "\n";
  const DasRequest& r = res.request;
  for (std::size_t li = 0; li < res.layers.size(); ++li)
    for (std::size_t mi = 0; mi < res.ms.size(); ++mi) {
      const auto row = [&](const std::string& k, double iia, const std::string& lo,
                           const std::string& hi, double rnd, const std::string& rlo,
                           const std::string& rhi, bool angles) {
        os << fmt::format(
            "{},{},{},{},{},{},{},{:.6g},{},{},{:.6g},{},{},{:.6g},{:.6g},{},{:.6g},{}", r.quantity,
            r.algorithm, DasPositionName(r.position), res.layers[li], res.ms[mi], k, r.test_pairs,
            iia, lo, hi, rnd, rlo, rhi, res.none_iia(li), res.full_iia(li), res.epochs(li, mi),
            res.probe_r2(li), r.quantity == "w" ? fmt::format("{:.6g}", res.ceiling_iia) : "");
        for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
          if (angles)
            os << fmt::format(",{:.4g},{:.4g}", res.angle_max(li, mi, si),
                              res.angle_min(li, mi, si));
          else
            os << ",,";
        os << "\n";
      };
      for (std::size_t ki = 0; ki < res.ks.size(); ++ki)
        row(std::to_string(res.ks[ki]), res.iia_k(li, mi, ki), "", "", res.random_iia_k(li, mi, ki),
            "", "", false);
      row("pooled", res.iia(li, mi), CsvValue(res.iia_lo(li, mi)), CsvValue(res.iia_hi(li, mi)),
          res.random_iia(li, mi), CsvValue(res.random_iia_lo(li, mi)),
          CsvValue(res.random_iia_hi(li, mi)), true);
    }
}

void PrintDasSummary(std::ostream& os, const DasResult& res) {
  const DasRequest& r = res.request;
  os << fmt::format(
      "das: {} counterfactual under {} at the {}; IIA pooled over k = {}..{} on {} held-out "
      "pairs, 95% bootstrap intervals\n",
      r.quantity, r.algorithm, DasPositionName(r.position), res.ks.front(), res.ks.back(),
      r.test_pairs);
  if (r.quantity == "w")
    os << fmt::format(
        "ceiling (the model itself on B's first k examples and A's query): IIA {:.4f} {}\n",
        res.ceiling_iia, IntervalText(res.ceiling_iia_lo, res.ceiling_iia_hi, 0, 4));
  os << "  state    m   IIA                        random subspace            epochs";
  for (const std::string& s : res.subspace_names)
    os << fmt::format("  max angle {}", s);
  os << "\n";
  for (std::size_t li = 0; li < res.layers.size(); ++li) {
    os << fmt::format(
        "  {:5d}  none {:.4f} {}   full {:.4f} {}   probe R2 {:.3f}\n", res.layers[li],
        res.none_iia(li), IntervalText(res.none_iia_lo(li), res.none_iia_hi(li), 0, 4),
        res.full_iia(li), IntervalText(res.full_iia_lo(li), res.full_iia_hi(li), 0, 4),
        res.probe_r2(li));
    os << "         interchanged as given:";
    for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
      os << fmt::format(
          "  {} {:.4f} {}", res.subspace_names[si], res.subspace_iia(li, si),
          IntervalText(res.subspace_iia_lo(li, si), res.subspace_iia_hi(li, si), 0, 4));
    os << "\n";
    for (std::size_t mi = 0; mi < res.ms.size(); ++mi) {
      os << fmt::format("  {:5d} {:4d}   {:7.4f} {}   {:7.4f} {}   {:6.0f}", res.layers[li],
                        res.ms[mi], res.iia(li, mi),
                        IntervalText(res.iia_lo(li, mi), res.iia_hi(li, mi), 7, 4),
                        res.random_iia(li, mi),
                        IntervalText(res.random_iia_lo(li, mi), res.random_iia_hi(li, mi), 7, 4),
                        res.epochs(li, mi));
      for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
        os << fmt::format("  {:8.1f}", res.angle_max(li, mi, si));
      os << "\n";
    }
  }
}

}  // namespace icl::intervene
