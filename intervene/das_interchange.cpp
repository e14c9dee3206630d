// Distributed alignment search's interchange (das_internal.hpp): the states of the pairs, the
// model's outputs with a subspace interchanged, IIA, the probe's directions and the training of
// the subspace.
#include "intervene/das_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "data/prompt_io.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "intervene/file_common.hpp"
#include "intervene/intervene.hpp"
#include "learners/arma_torch.hpp"
#include "learners/classical.hpp"

namespace icl::intervene {

namespace {

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

// R0 (D x D, orthogonal; D the support's rank), where the search starts (DasStart).
arma::mat StartRotation(const DasRequest& r, const arma::mat& support, const arma::mat& probe,
                        std::uint64_t stream) {
  const int D = static_cast<int>(support.n_cols);
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
  return r0m;
}

// The IIA of the subspace `basis` (H x m) on held-out pairs: the test pairs at k = ks[p mod K].
double HeldOutIia(learners::Transformer& model, const DasResult& res, int layer,
                  const PairStates& test, const arma::mat& test_t, const torch::Tensor& basis) {
  const DasRequest& r = res.request;
  const std::size_t K = res.ks.size();
  const long Q = test.a.size(0);
  const Interchange how{Interchange::kSubspace, basis};
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
}

// Learning-rate halvings on plateaus before DAS stops (TrainSubspace).
constexpr int kHalvings = 2;

}  // namespace

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
  const long P = train.a.size(0);
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
  const torch::Tensor r0 = learners::ToTensor(StartRotation(r, support, probe, stream));
  torch::Tensor s = torch::zeros({D, D}, torch::kFloat32).set_requires_grad(true);
  auto adam = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{s},
                                                   torch::optim::AdamOptions(r.learning_rate));
  const auto basis = [&]() {
    return torch::matmul(v, torch::matmul(torch::matrix_exp(s - s.t()), r0).slice(1, 0, m));
  };
  const auto held_out = [&]() {
    torch::NoGradGuard no_grad;
    return HeldOutIia(model, res, layer, test, test_t, basis().detach());
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

}  // namespace icl::intervene
