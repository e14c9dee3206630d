// LEACE erasure of a target from a layer's states, the model run on, and the erasure file
// (erase.hpp).
#include "intervene/erase.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "data/targets.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "formats/reader.hpp"
#include "formats/schemas.hpp"
#include "formats/writer.hpp"
#include "intervene/file_common.hpp"
#include "learners/arma_torch.hpp"
#include "probes/uncertainty.hpp"

namespace icl::intervene {

arma::mat Eraser::Apply(const arma::mat& h) const {
  arma::mat centred = h;
  centred.each_col() -= mean;
  return h - map * centred;
}

void EraserMoments::Add(const arma::mat& h, const arma::mat& z) {
  if (h.n_cols != z.n_cols) throw std::logic_error("EraserMoments: h and z differ in columns");
  if (n == 0) {
    sum_h.zeros(h.n_rows);
    sum_z.zeros(z.n_rows);
    sum_hh.zeros(h.n_rows, h.n_rows);
    sum_hz.zeros(h.n_rows, z.n_rows);
  }
  n += h.n_cols;
  sum_h += arma::sum(h, 1);
  sum_z += arma::sum(z, 1);
  sum_hh += h * h.t();
  sum_hz += h * z.t();
}

Eraser FitEraser(const arma::mat& h, const arma::mat& z, std::uint64_t random_seed) {
  EraserMoments m;
  m.Add(h, z);
  return FitEraser(m, random_seed);
}

Eraser FitEraser(const EraserMoments& m, std::uint64_t random_seed) {
  if (m.n < 2) throw std::logic_error("FitEraser: needs at least 2 columns");
  Eraser e;
  const double N = m.n;
  e.mean = m.sum_h / N;
  const arma::vec mean_z = m.sum_z / N;
  const arma::mat s_hh = m.sum_hh / N - e.mean * e.mean.t(),
                  s_hz = m.sum_hz / N - e.mean * mean_z.t();
  arma::vec lambda;
  arma::mat v;
  if (!arma::eig_sym(lambda, v, 0.5 * (s_hh + s_hh.t())))
    throw std::runtime_error("erase: the states' covariance has no eigendecomposition");
  const double top = lambda.max();
  if (!(top > 0)) throw std::runtime_error("erase: the states do not vary over the fit prompts");
  const arma::uvec keep = arma::find(lambda > 1e-10 * top);
  const arma::mat vs = v.cols(keep);
  const arma::vec l = lambda(keep);
  const arma::mat whiten = vs * arma::diagmat(1.0 / arma::sqrt(l)) * vs.t();
  const arma::mat unwhiten = vs * arma::diagmat(arma::sqrt(l)) * vs.t();
  // An orthonormal basis of the column space of W Sigma_hz (singular values above 1e-10 of the
  // largest), or a random one of the same rank inside the whitened support.
  arma::mat u, vr;
  arma::vec sv;
  const arma::mat a = whiten * s_hz;
  arma::svd_econ(u, sv, vr, a, "left");
  const double smax = sv.empty() ? 0.0 : sv.max();
  const arma::uword rank =
      smax > 0 ? arma::accu(sv > 1e-10 * smax) : 0;  // a target the states do not covary with
  e.rank = static_cast<int>(rank);
  arma::mat basis = u.head_cols(rank);
  if (random_seed != 0 && rank > 0) {
    // The control: a random orthonormal basis of the same rank inside the whitened support.
    basis = vs * data::RandomOrthonormal(static_cast<int>(vs.n_cols), static_cast<int>(rank),
                                         random_seed, 0x5eed);
  }
  e.map = unwhiten * basis * basis.t() * whiten;
  return e;
}

void EraseRequest::Validate() const {
  if (target != "xty" && target != "w_ols" && target != "w_ridge")
    throw core::InputError("erase", "target",
                           "expected xty, w_ols or w_ridge, got '" + target.substr(0, 40) + "'");
  if (fit_prompts < 2 || fit_prompts > 10000000)
    throw core::InputError("erase", "fit_prompts", "must be in 2..10000000");
  if (prompts < 2 || prompts > 10000000)
    throw core::InputError("erase", "prompts", "must be in 2..10000000");
  if (bootstrap < 1 || bootstrap > 1000000)
    throw core::InputError("erase", "bootstrap", "replicates must be in 1..1000000");
  if (batch < 1) throw core::InputError("erase", "batch", "must be positive");
  for (const auto& v : {layers, ks})
    if (std::set<int>(v.begin(), v.end()).size() != v.size())
      throw core::InputError("erase", &v == &layers ? "layers" : "k", "lists an entry twice");
}

namespace {

// The target after k examples of every prompt of `set`: m x N.
arma::mat TargetAfter(const data::PromptSet& set, const std::string& target, int k,
                      double ridge_lambda) {
  arma::mat z(set.task.d, set.x.n_slices);
  data::PrefixTargets t;
  for (arma::uword j = 0; j < set.x.n_slices; ++j) {
    data::ComputePrefixTargets(set.x.slice(j), set.y.col(j), ridge_lambda, t);
    z.col(j) = target == "xty" ? t.xty.col(k - 1)
                               : (target == "w_ols" ? t.w_ols.col(k - 1) : t.w_ridge.col(k - 1));
  }
  return z;
}

// The positions erased for k: the y-token of example k and the query x-token of example k + 1.
std::array<int, 2> Positions(int k) {
  return {data::AfterKPos(k), data::XTokenPos(k)};
}

// The erasers' moments of every (layer, k) over `set`: the states at the two positions of k
// (both holding the target after k examples), per layer and k.
std::vector<std::vector<EraserMoments>> FitMoments(
    learners::Transformer& model, const data::PromptSet& set, const std::vector<int>& layers,
    const std::vector<int>& ks, const std::vector<arma::mat>& targets, int batch) {
  const std::size_t N = set.x.n_slices;
  std::vector<std::vector<EraserMoments>> out(layers.size(), std::vector<EraserMoments>(ks.size()));
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  for (std::size_t first = 0; first < N; first += batch) {
    const std::size_t cnt = std::min<std::size_t>(batch, N - first);
    const learners::ForwardResult run = model->Run(data::TokenTensor(set, first, cnt), fo);
    for (std::size_t ki = 0; ki < ks.size(); ++ki) {
      const arma::mat z = targets[ki].cols(first, first + cnt - 1);
      for (std::size_t li = 0; li < layers.size(); ++li)
        for (const int pos : Positions(ks[ki]))
          out[li][ki].Add(learners::StateAt(run.hidden[layers[li]], pos), z);
    }
  }
  return out;
}

struct Interval3 {
  double mean, lo, hi;
};
Interval3 MeanInterval(const probes::Bootstrap& boot, const arma::vec& x) {
  const probes::Interval iv = probes::PercentileInterval(boot.Mean(0, x));
  return {arma::mean(x), iv.lo, iv.hi};
}

}  // namespace

ErasureResult RunErase(learners::Transformer model, const std::string& checkpoint_sha256,
                       const data::TaskConfig& task, const EraseRequest& request,
                       const std::function<void(long long, long long)>& progress) {
  request.Validate();
  const learners::ModelConfig& mc = model->config;
  ErasureResult res;
  res.request = request;
  res.task = task;
  res.checkpoint_sha256 = checkpoint_sha256;
  ResolveLayersAndKs("erase", mc, task, request.layers, request.ks, res.layers, res.ks);
  const std::size_t L = res.layers.size(), K = res.ks.size(), P = request.prompts;
  const double ridge_lambda = task.noise > 0 ? std::pow(task.noise / task.w_scale, 2) : 0.0;
  torch::NoGradGuard no_grad;
  model->eval();
  // The erasers, per (layer, k), on the fit prompts (their own stream).
  const data::PromptSet fit = data::SamplePrompts(task, request.seed + 1, 0, request.fit_prompts);
  std::vector<std::vector<Eraser>> erasers(L), randoms(L);
  {
    std::vector<arma::mat> targets;
    for (const int k : res.ks)
      targets.push_back(TargetAfter(fit, request.target, k, ridge_lambda));
    const auto moments = FitMoments(model, fit, res.layers, res.ks, targets, request.batch);
    res.rank.set_size(L, K);
    for (std::size_t ki = 0; ki < K; ++ki) {
      for (std::size_t li = 0; li < L; ++li) {
        erasers[li].push_back(FitEraser(moments[li][ki]));
        randoms[li].push_back(FitEraser(
            moments[li][ki],
            request.seed ^ (0x9e3779b97f4a7c15ULL + (std::uint64_t(res.layers[li]) << 32) +
                            std::uint64_t(res.ks[ki]))));
        res.rank(li, ki) = erasers[li][ki].rank;
      }
    }
  }
  // The test prompts: the model as it is, and run on from each erased layer.
  const data::PromptSet test = data::SamplePrompts(task, request.seed, 0, request.prompts);
  res.base_error.set_size(P, K);
  res.zero_error.set_size(P, K);
  res.erased.set_size(P, K, L);
  res.random.set_size(P, K, L);
  const double d = task.d;
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  const long long total = static_cast<long long>(P) * L * K;
  long long done = 0;
  for (std::size_t first = 0; first < P; first += request.batch) {
    const std::size_t cnt = std::min<std::size_t>(request.batch, P - first);
    const learners::ForwardResult run = model->Run(data::TokenTensor(test, first, cnt), fo);
    const arma::fmat pred_f(run.predictions.contiguous().data_ptr<float>(), test.task.n, cnt,
                            /*copy_aux_mem=*/true);
    const arma::mat pred = arma::conv_to<arma::mat>::from(pred_f);  // n x cnt
    for (std::size_t ki = 0; ki < K; ++ki) {
      const int k = res.ks[ki];
      for (std::size_t j = 0; j < cnt; ++j) {
        const double y = test.y(k, first + j);  // y_(k+1)
        res.base_error(first + j, ki) = std::pow(pred(k, j) - y, 2) / d;
        res.zero_error(first + j, ki) = y * y / d;
      }
      for (std::size_t li = 0; li < L; ++li)
        for (int variant = 0; variant < 2; ++variant) {
          const Eraser& e = variant == 0 ? erasers[li][ki] : randoms[li][ki];
          torch::Tensor edited = run.hidden[res.layers[li]].clone();
          for (const int pos : Positions(k))
            learners::SetStateAt(edited, pos, e.Apply(learners::StateAt(edited, pos)));
          const torch::Tensor p = model->RunFrom(res.layers[li], edited).select(1, k).contiguous();
          arma::cube& out = variant == 0 ? res.erased : res.random;
          const float* pp = p.data_ptr<float>();
          for (std::size_t j = 0; j < cnt; ++j) {
            const double y = test.y(k, first + j);
            out(first + j, ki, li) = std::pow(pp[j] - y, 2) / d;
          }
          if (variant == 1) {
            done += cnt;
            if (progress) progress(done, total);
          }
        }
    }
  }
  if (!res.erased.is_finite() || !res.random.is_finite() || !res.base_error.is_finite())
    throw std::runtime_error(
        "erase: a prediction is not finite (the model overflowed on an erased state); nothing "
        "was written");
  // Summaries: one set of prompt resamples for every statistic.
  const probes::Bootstrap boot(P, 1, request.bootstrap, request.seed + 2);
  for (arma::mat* m :
       {&res.erased_mean, &res.erased_lo, &res.erased_hi, &res.random_mean, &res.random_lo,
        &res.random_hi, &res.erased_increase, &res.erased_increase_lo, &res.erased_increase_hi,
        &res.random_increase, &res.random_increase_lo, &res.random_increase_hi})
    m->set_size(L, K);
  for (arma::vec* v :
       {&res.base_mean, &res.base_lo, &res.base_hi, &res.zero_mean, &res.zero_lo, &res.zero_hi})
    v->set_size(K);
  for (std::size_t ki = 0; ki < K; ++ki) {
    const arma::vec base = res.base_error.col(ki);
    const Interval3 b = MeanInterval(boot, base), z = MeanInterval(boot, res.zero_error.col(ki));
    res.base_mean(ki) = b.mean, res.base_lo(ki) = b.lo, res.base_hi(ki) = b.hi;
    res.zero_mean(ki) = z.mean, res.zero_lo(ki) = z.lo, res.zero_hi(ki) = z.hi;
    for (std::size_t li = 0; li < L; ++li) {
      const arma::vec er = res.erased.slice(li).col(ki), ra = res.random.slice(li).col(ki);
      const Interval3 e = MeanInterval(boot, er), r = MeanInterval(boot, ra),
                      de = MeanInterval(boot, er - base), dr = MeanInterval(boot, ra - base);
      res.erased_mean(li, ki) = e.mean, res.erased_lo(li, ki) = e.lo, res.erased_hi(li, ki) = e.hi;
      res.random_mean(li, ki) = r.mean, res.random_lo(li, ki) = r.lo, res.random_hi(li, ki) = r.hi;
      res.erased_increase(li, ki) = de.mean, res.erased_increase_lo(li, ki) = de.lo,
                              res.erased_increase_hi(li, ki) = de.hi;
      res.random_increase(li, ki) = dr.mean, res.random_increase_lo(li, ki) = dr.lo,
                              res.random_increase_hi(li, ki) = dr.hi;
    }
  }
  return res;
}

namespace {

constexpr const char* kErasurePerCell[] = {
    "erased_mean",        "erased_lo",       "erased_hi",          "random_mean",
    "random_lo",          "random_hi",       "erased_increase",    "erased_increase_lo",
    "erased_increase_hi", "random_increase", "random_increase_lo", "random_increase_hi"};
constexpr const char* kPerK[] = {"base_mean", "base_lo", "base_hi",
                                 "zero_mean", "zero_lo", "zero_hi"};
template <typename R>
auto& ErasurePerCell(R& r, int i) {
  return *std::array{&r.erased_mean,     &r.erased_lo,          &r.erased_hi,
                     &r.random_mean,     &r.random_lo,          &r.random_hi,
                     &r.erased_increase, &r.erased_increase_lo, &r.erased_increase_hi,
                     &r.random_increase, &r.random_increase_lo, &r.random_increase_hi}[i];
}
template <typename R>
auto& PerK(R& r, int i) {
  return *std::array{&r.base_mean, &r.base_lo, &r.base_hi, &r.zero_mean, &r.zero_lo, &r.zero_hi}[i];
}

}  // namespace

void WriteErasureFile(const std::string& path, const ErasureResult& res) {
  const hsize_t L = res.layers.size(), K = res.ks.size(), P = res.request.prompts;
  formats::Writer f(path, formats::ErasureSchema());
  f.SetAttr("checkpoint", res.checkpoint);
  f.SetAttr("checkpoint_sha256", res.checkpoint_sha256);
  f.SetAttr("target", res.request.target);
  f.SetAttr("seed", static_cast<std::int64_t>(res.request.seed));
  f.SetAttr("prompts", static_cast<std::int64_t>(P));
  f.SetAttr("fit_prompts", static_cast<std::int64_t>(res.request.fit_prompts));
  f.SetAttr("bootstrap_replicates", res.request.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", res.layers);
  f.SetAttr("ks", res.ks);
  const formats::Sizes sizes = {{"layer", L}, {"k", K}, {"prompt", P}};
  for (int i = 0; i < 12; ++i)
    f.Write(kErasurePerCell[i], sizes, RowMajor(ErasurePerCell(res, i)));
  f.Write("rank", sizes, RowMajor(arma::conv_to<arma::mat>::from(res.rank)));
  for (int i = 0; i < 6; ++i)
    f.Write(kPerK[i], sizes, PerK(res, i).memptr(), PerK(res, i).n_elem);
  // [layer, k, prompt] is the cube's own memory order (rows prompts, cols k, slices layers).
  f.Write("erased_error", sizes, res.erased.memptr(), res.erased.n_elem);
  f.Write("random_error", sizes, res.random.memptr(), res.random.n_elem);
  f.Write("base_error", sizes, res.base_error.memptr(), res.base_error.n_elem);
  f.Write("zero_error", sizes, res.zero_error.memptr(), res.zero_error.n_elem);
  f.Close();
}

ErasureResult ReadErasureFile(const std::string& path) {
  const formats::Reader f(path, formats::ErasureSchema());
  const std::string& where = f.where();
  ErasureResult res;
  res.checkpoint = f.String("checkpoint");
  res.checkpoint_sha256 = f.String("checkpoint_sha256");
  res.request.target = f.String("target");
  res.task = data::TaskConfig::FromJson(f.String("task_config"), where + " task_config");
  res.request.seed = static_cast<std::uint64_t>(f.Int("seed"));
  const std::int64_t prompts = f.Int("prompts"), fit = f.Int("fit_prompts");
  if (prompts < 2 || prompts > 10000000 || fit < 2 || fit > 10000000)
    throw core::InputError(where, "", "attributes 'prompts' and 'fit_prompts' must be in 2..1e7");
  res.request.prompts = static_cast<int>(prompts);
  res.request.fit_prompts = static_cast<int>(fit);
  res.request.bootstrap = static_cast<int>(f.Int("bootstrap_replicates"));
  try {
    res.request.Validate();
  } catch (const core::InputError& e) {
    throw core::InputError(where, "", "attribute '" + e.field() + "': " + e.text());
  }
  ReadLayersAndKs(f, res.task, res.layers, res.ks);
  const hsize_t L = res.layers.size(), K = res.ks.size(), P = prompts;
  if (static_cast<double>(2 * L + 2) * K * P > 5e8)
    throw core::InputError(where, "", "its per-prompt datasets would hold more than 5e8 values");
  const formats::Sizes sizes = {{"layer", L}, {"k", K}, {"prompt", P}};
  for (int i = 0; i < 12; ++i) {
    const std::vector<double> v = f.Read(kErasurePerCell[i], sizes);
    ErasurePerCell(res, i) = arma::mat(v.data(), K, L).t();
  }
  const std::vector<double> rank = f.Read("rank", sizes);
  res.rank = arma::conv_to<arma::imat>::from(arma::mat(rank.data(), K, L).t());
  for (int i = 0; i < 6; ++i) {
    const std::vector<double> v = f.Read(kPerK[i], sizes);
    PerK(res, i) = arma::vec(v);
  }
  const std::vector<double> e = f.Read("erased_error", sizes), r = f.Read("random_error", sizes),
                            b = f.Read("base_error", sizes), z = f.Read("zero_error", sizes);
  res.erased = arma::cube(e.data(), P, K, L);
  res.random = arma::cube(r.data(), P, K, L);
  res.base_error = arma::mat(b.data(), P, K);
  res.zero_error = arma::mat(z.data(), P, K);
  return res;
}

void WriteErasureCsv(std::ostream& os, const ErasureResult& res) {
  os << "target,layer,k,prompts,rank,base,base_lo,base_hi,erased,erased_lo,erased_hi,"
        "erased_increase,erased_increase_lo,erased_increase_hi,random,random_lo,random_hi,"
        "random_increase,random_increase_lo,random_increase_hi,zero,zero_lo,zero_hi\n";
  for (std::size_t li = 0; li < res.layers.size(); ++li)
    for (std::size_t ki = 0; ki < res.ks.size(); ++ki)
      os << fmt::format(
          "{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},"
          "{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n",
          res.request.target, res.layers[li], res.ks[ki], res.request.prompts, res.rank(li, ki),
          res.base_mean(ki), res.base_lo(ki), res.base_hi(ki), res.erased_mean(li, ki),
          res.erased_lo(li, ki), res.erased_hi(li, ki), res.erased_increase(li, ki),
          res.erased_increase_lo(li, ki), res.erased_increase_hi(li, ki), res.random_mean(li, ki),
          res.random_lo(li, ki), res.random_hi(li, ki), res.random_increase(li, ki),
          res.random_increase_lo(li, ki), res.random_increase_hi(li, ki), res.zero_mean(ki),
          res.zero_lo(ki), res.zero_hi(ki));
}

void PrintErasureSummary(std::ostream& os, const ErasureResult& res) {
  os << fmt::format(
      "erase: target {}, {} test prompts, erasers on {} fit prompts; error / d of the prediction "
      "of y_(k+1) with the target erased at the y-token of example k and the query, against a "
      "random subspace of the same rank, 95% bootstrap intervals over prompts\n",
      res.request.target, res.request.prompts, res.request.fit_prompts);
  for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
    os << fmt::format(
        "k = {}: model {:.4g} [{:.4g}, {:.4g}], zero predictor {:.4g} [{:.4g}, {:.4g}]\n"
        "  state  rank   erased                          random\n",
        res.ks[ki], res.base_mean(ki), res.base_lo(ki), res.base_hi(ki), res.zero_mean(ki),
        res.zero_lo(ki), res.zero_hi(ki));
    for (std::size_t li = 0; li < res.layers.size(); ++li)
      os << fmt::format(
          "  {:5d}  {:4d}   {:9.4g} [{:9.4g}, {:9.4g}]   {:9.4g} [{:9.4g}, {:9.4g}]\n",
          res.layers[li], res.rank(li, ki), res.erased_mean(li, ki), res.erased_lo(li, ki),
          res.erased_hi(li, ki), res.random_mean(li, ki), res.random_lo(li, ki),
          res.random_hi(li, ki));
  }
}

}  // namespace icl::intervene
