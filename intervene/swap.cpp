// Whole-context counterfactuals and the swaps file (swap.hpp).
#include "intervene/swap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/errors.hpp"
#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "formats/reader.hpp"
#include "formats/schemas.hpp"
#include "formats/writer.hpp"
#include "intervene/file_common.hpp"
#include "intervene/intervene.hpp"
#include "learners/classical.hpp"
#include "probes/uncertainty.hpp"

namespace icl::intervene {

void SwapRequest::Validate() const {
  if (pairs < 2 || pairs > 1000000)
    throw core::InputError("swap", "pairs", "must be in 2..1000000, got " + std::to_string(pairs));
  if (bootstrap < 1 || bootstrap > 1000000)
    throw core::InputError("swap", "bootstrap", "replicates must be in 1..1000000");
  if (batch < 1) throw core::InputError("swap", "batch", "must be positive");
  if (learners.empty())
    throw core::InputError("swap", "learners", "must name at least one learner, e.g. ols");
  for (const auto& v : {layers, ks})
    if (std::set<int>(v.begin(), v.end()).size() != v.size())
      throw core::InputError("swap", &v == &layers ? "layers" : "k", "lists an entry twice");
}

namespace {

// Each reference's change at A's x_{k+1}: the learner run on (B's first k examples, A's
// x_{k+1}) less the learner run on A's prompt, prediction k of each.
void ReferenceChanges(const std::vector<std::unique_ptr<learners::ClassicalLearner>>& learners,
                      const data::PromptSet& a, const data::PromptSet& b, std::size_t first,
                      SwapResult& res) {
  const std::size_t K = res.ks.size();
  const int d = res.task.d;
  learners::LearnerRun run_a, run_c;
  for (std::size_t li = 0; li < learners.size(); ++li)
    for (std::size_t j = 0; j < a.x.n_slices; ++j) {
      learners[li]->Run(a.x.slice(j), a.y.col(j), run_a);
      for (std::size_t ki = 0; ki < K; ++ki) {
        const int k = res.ks[ki];
        arma::mat x(d, k + 1);
        x.head_cols(k) = b.x.slice(j).head_cols(k);
        x.col(k) = a.x.slice(j).col(k);
        arma::vec y(k + 1, arma::fill::zeros);  // y_{k+1} is never read by prediction k
        y.head(k) = b.y.col(j).head(k);
        learners[li]->Run(x, y, run_c);
        res.reference_change(first + j, ki, li + 1) = run_c.predictions(k) - run_a.predictions(k);
      }
    }
}

void RunPairs(learners::Transformer& model,
              const std::vector<std::unique_ptr<learners::ClassicalLearner>>& learners,
              SwapResult& res, std::size_t first, const std::function<void(long long)>& advance) {
  const std::size_t cnt = std::min<std::size_t>(res.request.batch, res.request.pairs - first);
  data::PromptSet a, b;
  SamplePairs(res.task, res.request.seed, first, cnt, a, b);
  ReferenceChanges(learners, a, b, first, res);
  learners::ForwardOptions fo;
  fo.hidden_states = true;
  const learners::ForwardResult run_a = model->Run(data::TokenTensor(a, 0, cnt), fo);
  const learners::ForwardResult run_b = model->Run(data::TokenTensor(b, 0, cnt), fo);
  const torch::Tensor base = run_a.predictions.contiguous();
  // The model's own counterfactual: A's state with B's context at the embedding is the
  // counterfactual prompt itself.
  const auto swapped = [&](int layer, int k) {
    torch::Tensor edited = run_a.hidden[layer].clone();
    const auto context = torch::indexing::Slice(0, data::XTokenPos(k));
    edited.index_put_({torch::indexing::Slice(), context},
                      run_b.hidden[layer].index({torch::indexing::Slice(), context}));
    const torch::Tensor pred = model->RunFrom(layer, edited);
    return (pred.select(1, k) - base.select(1, k)).to(torch::kFloat64).contiguous();
  };
  for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
    const torch::Tensor own = swapped(0, res.ks[ki]);
    for (std::size_t j = 0; j < cnt; ++j)
      res.reference_change(first + j, ki, 0) = own.data_ptr<double>()[j];
  }
  for (std::size_t li = 0; li < res.layers.size(); ++li)
    for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
      const torch::Tensor change = swapped(res.layers[li], res.ks[ki]);
      for (std::size_t j = 0; j < cnt; ++j)
        res.model_change(first + j, ki, li) = change.data_ptr<double>()[j];
      advance(cnt);
    }
}

// The summaries of one (reference, layer) over pairs, per k and pooled (swap.hpp).
void Summarise(SwapResult& res, std::size_t ri, std::size_t li, const probes::Bootstrap& boot) {
  const std::size_t K = res.ks.size(), P = res.request.pairs;
  const int B = boot.replicates();
  arma::vec num(B, arma::fill::zeros), den(B, arma::fill::zeros), sxy(B, arma::fill::zeros),
      sxx(B, arma::fill::zeros);
  double pooled_num = 0, pooled_den = 0, pooled_sxy = 0, pooled_sxx = 0;
  for (std::size_t ki = 0; ki < K; ++ki) {
    const arma::vec m = res.model_change.slice(li).col(ki);
    const arma::vec a = res.reference_change.slice(ri).col(ki);
    const arma::vec e2 = arma::square(m - a), a2 = arma::square(a), ma = m % a;
    const double var_a = arma::mean(a2) - std::pow(arma::mean(a), 2);
    if (NoSpread(var_a, arma::mean(a2), double(P)))
      throw std::runtime_error(fmt::format(
          "swap: reference '{}' does not change at k = {} in any pair (every counterfactual "
          "prompt gives it A's prediction); there is nothing to compare",
          res.references[ri], res.ks[ki]));
    const arma::vec b_e2 = boot.Mean(0, e2), b_a2 = boot.Mean(0, a2), b_a = boot.Mean(0, a),
                    b_ma = boot.Mean(0, ma);
    const arma::vec b_var = b_a2 - arma::square(b_a);
    res.reproduced(ri, li, ki) = 1.0 - arma::mean(e2) / var_a;
    res.slope(ri, li, ki) = arma::accu(ma) / arma::accu(a2);
    const double sm = arma::stddev(m), sa = arma::stddev(a);
    res.correlation(ri, li, ki) = sm > 0 && sa > 0 ? arma::as_scalar(arma::cor(m, a)) : 0.0;
    // A replicate whose pairs all give the same change (a run of few pairs) has no spread to
    // reproduce: its share is undefined, and so is the interval (NaN, file_common.hpp).
    const probes::Interval iv = probes::PercentileInterval(1.0 - SpreadRatio(b_e2, b_var, b_a2, P));
    res.reproduced_lo(ri, li, ki) = iv.lo;
    res.reproduced_hi(ri, li, ki) = iv.hi;
    const probes::Interval is = probes::PercentileInterval(SpreadRatio(b_ma, b_a2, b_a2, P));
    res.slope_lo(ri, li, ki) = is.lo;
    res.slope_hi(ri, li, ki) = is.hi;
    num += b_e2, den += b_var, sxy += b_ma, sxx += b_a2;
    pooled_num += arma::mean(e2), pooled_den += var_a, pooled_sxy += arma::mean(ma),
        pooled_sxx += arma::mean(a2);
  }
  res.pooled_reproduced(ri, li) = 1.0 - pooled_num / pooled_den;
  res.pooled_slope(ri, li) = pooled_sxy / pooled_sxx;
  const double terms = double(P) * double(K);  // the pooled sums run over pairs and k
  const probes::Interval iv = probes::PercentileInterval(1.0 - SpreadRatio(num, den, sxx, terms));
  res.pooled_reproduced_lo(ri, li) = iv.lo;
  res.pooled_reproduced_hi(ri, li) = iv.hi;
  const probes::Interval is = probes::PercentileInterval(SpreadRatio(sxy, sxx, sxx, terms));
  res.pooled_slope_lo(ri, li) = is.lo;
  res.pooled_slope_hi(ri, li) = is.hi;
}

}  // namespace

SwapResult RunSwap(learners::Transformer model, const std::string& checkpoint_sha256,
                   const data::TaskConfig& task, const SwapRequest& request,
                   const std::function<void(long long, long long)>& progress) {
  request.Validate();
  SwapResult res;
  res.request = request;
  res.task = task;
  res.checkpoint_sha256 = checkpoint_sha256;
  ResolveLayersAndKs("swap", model->config, task, request.layers, request.ks, res.layers, res.ks);
  const auto learners = learners::MakeLearners(request.learners, task);
  res.references = {kModelReference};
  for (const auto& l : learners) {
    if (std::find(res.references.begin(), res.references.end(), l->spec()) != res.references.end())
      throw core::InputError("swap", "learners", "names '" + l->spec() + "' twice");
    res.references.push_back(l->spec());
  }
  const std::size_t P = request.pairs, K = res.ks.size(), L = res.layers.size(),
                    R = res.references.size();
  res.model_change.set_size(P, K, L);
  res.reference_change.set_size(P, K, R);
  torch::NoGradGuard no_grad;
  model->eval();
  const long long total = static_cast<long long>(P) * L * K;
  long long done = 0;
  for (std::size_t first = 0; first < P; first += request.batch)
    RunPairs(model, learners, res, first, [&](long long count) {
      done += count;
      if (progress) progress(done, total);
    });
  if (!res.model_change.is_finite() || !res.reference_change.is_finite())
    throw std::runtime_error(
        "swap: a prediction is not finite (the model or an algorithm overflowed on a "
        "counterfactual prompt); nothing was written");
  for (arma::cube* c : {&res.reproduced, &res.reproduced_lo, &res.reproduced_hi, &res.slope,
                        &res.slope_lo, &res.slope_hi, &res.correlation})
    c->set_size(R, L, K);
  for (arma::mat* m : {&res.pooled_reproduced, &res.pooled_reproduced_lo, &res.pooled_reproduced_hi,
                       &res.pooled_slope, &res.pooled_slope_lo, &res.pooled_slope_hi})
    m->set_size(R, L);
  // One set of pair resamples for every statistic, so that their intervals are comparable.
  const probes::Bootstrap boot(P, 1, request.bootstrap, request.seed + 1);
  for (std::size_t ri = 0; ri < R; ++ri)
    for (std::size_t li = 0; li < L; ++li)
      Summarise(res, ri, li, boot);
  return res;
}

namespace {

// Dataset names and their cubes, named once for the writer and the reader.
constexpr const char* kSwapPerCell[] = {"reproduced", "reproduced_lo", "reproduced_hi", "slope",
                                        "slope_lo",   "slope_hi",      "correlation"};
constexpr const char* kPooled[] = {"pooled_reproduced",    "pooled_reproduced_lo",
                                   "pooled_reproduced_hi", "pooled_slope",
                                   "pooled_slope_lo",      "pooled_slope_hi"};
template <typename R>
auto& SwapPerCell(R& r, int i) {
  auto* c = std::array{&r.reproduced, &r.reproduced_lo, &r.reproduced_hi, &r.slope,
                       &r.slope_lo,   &r.slope_hi,      &r.correlation}[i];
  return *c;
}
template <typename R>
auto& Pooled(R& r, int i) {
  auto* m = std::array{&r.pooled_reproduced, &r.pooled_reproduced_lo, &r.pooled_reproduced_hi,
                       &r.pooled_slope,      &r.pooled_slope_lo,      &r.pooled_slope_hi}[i];
  return *m;
}

// cube (rows R, cols L, slices K) -> [R, L, K] row-major: v[(r * L + l) * K + k].
std::vector<double> CubeRLK(const arma::cube& c) {
  std::vector<double> v(c.n_elem);
  for (arma::uword r = 0; r < c.n_rows; ++r)
    for (arma::uword l = 0; l < c.n_cols; ++l)
      for (arma::uword k = 0; k < c.n_slices; ++k)
        v[(r * c.n_cols + l) * c.n_slices + k] = c(r, l, k);
  return v;
}
// cube (rows P, cols K, slices S) -> [S, K, P] row-major: Armadillo's own memory order.
std::vector<double> CubeSKP(const arma::cube& c) {
  return std::vector<double>(c.memptr(), c.memptr() + c.n_elem);
}
// mat (rows R, cols L) -> [R, L] row-major.
std::vector<double> MatRL(const arma::mat& m) {
  const arma::mat t = m.t();
  return std::vector<double>(t.memptr(), t.memptr() + t.n_elem);
}

}  // namespace

void WriteSwapsFile(const std::string& path, const SwapResult& res) {
  const hsize_t R = res.references.size(), L = res.layers.size(), K = res.ks.size(),
                P = res.request.pairs;
  formats::Writer f(path, formats::SwapsSchema());
  f.SetAttr("checkpoint", res.checkpoint);
  f.SetAttr("checkpoint_sha256", res.checkpoint_sha256);
  f.SetAttr("seed", static_cast<std::int64_t>(res.request.seed));
  f.SetAttr("pairs", static_cast<std::int64_t>(P));
  f.SetAttr("bootstrap_replicates", res.request.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", res.layers);
  f.SetAttr("ks", res.ks);
  f.SetAttr("references", res.references);
  const formats::Sizes sizes = {{"reference", R}, {"layer", L}, {"k", K}, {"pair", P}};
  for (int i = 0; i < 7; ++i)
    f.Write(kSwapPerCell[i], sizes, CubeRLK(SwapPerCell(res, i)));
  for (int i = 0; i < 6; ++i)
    f.Write(kPooled[i], sizes, MatRL(Pooled(res, i)));
  f.Write("model_change", sizes, CubeSKP(res.model_change));
  f.Write("reference_change", sizes, CubeSKP(res.reference_change));
  f.Close();
}

SwapResult ReadSwapsFile(const std::string& path) {
  const formats::Reader f(path, formats::SwapsSchema());
  const std::string& where = f.where();
  SwapResult res;
  res.checkpoint = f.String("checkpoint");
  res.checkpoint_sha256 = f.String("checkpoint_sha256");
  res.task = data::TaskConfig::FromJson(f.String("task_config"), where + " task_config");
  res.request.seed = static_cast<std::uint64_t>(f.Int("seed"));
  const std::int64_t pairs = f.Int("pairs");
  if (pairs < 2 || pairs > 1000000)
    throw core::InputError(
        where, "", "attribute 'pairs' is " + std::to_string(pairs) + ", expected 2..1000000");
  res.request.pairs = static_cast<int>(pairs);
  res.request.bootstrap = static_cast<int>(f.Int("bootstrap_replicates"));
  ReadLayersAndKs(f, res.task, res.layers, res.ks);
  res.references = f.StringList("references");
  if (res.references.empty() || res.references.size() > 64 ||
      res.references[0] != kModelReference ||
      std::set<std::string>(res.references.begin(), res.references.end()).size() !=
          res.references.size())
    throw core::InputError(where, "",
                           "attribute 'references' must hold 1..64 distinct names, 'model' first");
  for (std::size_t i = 1; i < res.references.size(); ++i)
    try {
      learners::MakeLearner(res.references[i], res.task);  // a spec, not any text
    } catch (const core::InputError&) {
      throw core::InputError(where, "",
                             "attribute 'references' holds '" + res.references[i].substr(0, 40) +
                                 "', not a learner spec");
    }
  const hsize_t R = res.references.size(), L = res.layers.size(), K = res.ks.size(), P = pairs;
  // The per-pair datasets are the large ones: bounded before any read.
  if (static_cast<double>(L + R) * K * P > 5e8)
    throw core::InputError(where, "", "its per-pair datasets would hold more than 5e8 values");
  const formats::Sizes sizes = {{"reference", R}, {"layer", L}, {"k", K}, {"pair", P}};
  for (int i = 0; i < 7; ++i) {
    const std::vector<double> v = f.Read(kSwapPerCell[i], sizes);
    arma::cube& c = SwapPerCell(res, i);
    c.set_size(R, L, K);
    for (hsize_t r = 0; r < R; ++r)
      for (hsize_t l = 0; l < L; ++l)
        for (hsize_t k = 0; k < K; ++k)
          c(r, l, k) = v[(r * L + l) * K + k];
  }
  for (int i = 0; i < 6; ++i) {
    const std::vector<double> v = f.Read(kPooled[i], sizes);
    Pooled(res, i) = arma::mat(v.data(), L, R).t();
  }
  const std::vector<double> m = f.Read("model_change", sizes);
  res.model_change = arma::cube(m.data(), P, K, L);
  const std::vector<double> a = f.Read("reference_change", sizes);
  res.reference_change = arma::cube(a.data(), P, K, R);
  return res;
}

void WriteSwapsCsv(std::ostream& os, const SwapResult& res) {
  os << "reference,layer,k,pairs,reproduced,reproduced_lo,reproduced_hi,slope,slope_lo,slope_hi,"
        "correlation,mean_abs_model_change,mean_abs_reference_change\n";
  const auto mean_abs = [](const arma::vec& v) { return arma::mean(arma::abs(v)); };
  for (std::size_t ri = 0; ri < res.references.size(); ++ri)
    for (std::size_t li = 0; li < res.layers.size(); ++li) {
      for (std::size_t ki = 0; ki < res.ks.size(); ++ki)
        os << fmt::format("{},{},{},{},{:.6g},{},{},{:.6g},{},{},{:.6g},{:.6g},{:.6g}\n",
                          res.references[ri], res.layers[li], res.ks[ki], res.request.pairs,
                          res.reproduced(ri, li, ki), CsvValue(res.reproduced_lo(ri, li, ki)),
                          CsvValue(res.reproduced_hi(ri, li, ki)), res.slope(ri, li, ki),
                          CsvValue(res.slope_lo(ri, li, ki)), CsvValue(res.slope_hi(ri, li, ki)),
                          res.correlation(ri, li, ki), mean_abs(res.model_change.slice(li).col(ki)),
                          mean_abs(res.reference_change.slice(ri).col(ki)));
      os << fmt::format("{},{},pooled,{},{:.6g},{},{},{:.6g},{},{},,{:.6g},{:.6g}\n",
                        res.references[ri], res.layers[li], res.request.pairs,
                        res.pooled_reproduced(ri, li), CsvValue(res.pooled_reproduced_lo(ri, li)),
                        CsvValue(res.pooled_reproduced_hi(ri, li)), res.pooled_slope(ri, li),
                        CsvValue(res.pooled_slope_lo(ri, li)),
                        CsvValue(res.pooled_slope_hi(ri, li)),
                        arma::mean(arma::vectorise(arma::abs(res.model_change.slice(li)))),
                        arma::mean(arma::vectorise(arma::abs(res.reference_change.slice(ri)))));
    }
}

void PrintSwapSummary(std::ostream& os, const SwapResult& res) {
  os << fmt::format(
      "swap: {} pairs, k = {}..{} ({} values); share of each reference's counterfactual change "
      "that the model reproduces with B's context at the layer (1: all, 0: none), pooled over k, "
      "95% bootstrap intervals over pairs\n",
      res.request.pairs, res.ks.front(), res.ks.back(), res.ks.size());
  os << "  layer";
  for (const auto& r : res.references)
    os << fmt::format("  {:>26}", r.substr(0, 26));
  os << "\n";
  for (std::size_t li = 0; li < res.layers.size(); ++li) {
    os << fmt::format("  {:5d}", res.layers[li]);
    for (std::size_t ri = 0; ri < res.references.size(); ++ri)
      os << fmt::format(
          "  {:7.3f} {}", res.pooled_reproduced(ri, li),
          IntervalText(res.pooled_reproduced_lo(ri, li), res.pooled_reproduced_hi(ri, li), 7, 3));
    os << "\n";
  }
}

}  // namespace icl::intervene
