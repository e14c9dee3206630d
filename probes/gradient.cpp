// Pooled linear / MLP probes trained with LibTorch.
#include "probes/gradient.hpp"

#include <sys/mman.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "core/errors.hpp"
#include "learners/gelu.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <mutex>

namespace icl::probes {

PooledProbeImpl::PooledProbeImpl(int positions, int hidden, int outputs,
                                 const GradientProbeOptions& o)
    : pooled(o.pooled), mlp(o.mlp) {
  if (pooled) scores = register_parameter("scores", torch::zeros({positions}));
  proj = register_module("proj", torch::nn::Linear(hidden, hidden));
  if (mlp) {
    fc1 = register_module("fc1", torch::nn::Linear(hidden, o.mlp_hidden));
    fc2 = register_module("fc2", torch::nn::Linear(o.mlp_hidden, outputs));
  } else {
    fc1 = register_module("fc1", torch::nn::Linear(hidden, outputs));
  }
}

torch::Tensor PooledProbeImpl::forward(const torch::Tensor& x) {
  // sum_t alpha_t W_v h_t = W_v (sum_t alpha_t h_t): pool first, project once.
  auto v = pooled ? torch::einsum("bth,t->bh", {x, Alpha(/*detach=*/false)}) : x;
  v = proj(v);
  if (!mlp) return fc1(v);
  return fc2(learners::FusedGelu(fc1(v)));
}

torch::Tensor PooledProbeImpl::Alpha(bool detach) const {
  if (!pooled) return torch::Tensor();
  // alpha = softmax(10 s): the factor lets Adam move the pooling logits ten times faster than
  // the weights, so that pooling concentrates within a few hundred steps.
  return torch::softmax(kScoreScale * (detach ? scores.detach() : scores), /*dim=*/0);
}

torch::Tensor LargeEmpty(at::IntArrayRef sizes) {
  std::int64_t n = 1;
  for (auto v : sizes)
    n *= v;
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const std::size_t bytes = std::max<std::size_t>(1, std::size_t(n) * sizeof(float));
  if (bytes < 4 * kHuge) return torch::empty(sizes, torch::kFloat32);
  // Map 2 MiB more than needed and start at a 2 MiB boundary, so every page can be a huge one.
  const std::size_t mapped = bytes + kHuge;
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return torch::empty(sizes, torch::kFloat32);
  auto* start = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(base) + kHuge - 1) &
                                        ~(std::uintptr_t(kHuge) - 1));
#ifdef MADV_HUGEPAGE
  ::madvise(start, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
#endif
  return torch::from_blob(
      start, sizes, [base, mapped](void*) { ::munmap(base, mapped); },
      torch::TensorOptions().dtype(torch::kFloat32));
}

namespace {

torch::Tensor Rows(const torch::Tensor& t, const arma::uvec& idx) {
  auto i = torch::from_blob(const_cast<arma::uword*>(idx.memptr()), {static_cast<long>(idx.n_elem)},
                            torch::kInt64)
               .clone();
  return t.index_select(0, i);
}

torch::Tensor TargetRows(const arma::mat& y, const arma::uvec& idx) {
  const arma::mat sub = y.cols(idx);  // m x b column-major == row-major [b, m]
  return torch::from_blob(const_cast<double*>(sub.memptr()),
                          {static_cast<long>(sub.n_cols), static_cast<long>(sub.n_rows)},
                          torch::kFloat64)
      .to(torch::kFloat32);
}

}  // namespace

namespace {

// G probes of one shape as stacked tensors: [G, ...] per parameter of PooledProbe, in its order
// (scores when pooled, proj, fc1, fc2 when MLP; weights [out, in] as torch::nn::Linear keeps
// them). Each slice g is an independent probe: every operation below acts on slices separately
// (batched matrix products, softmax over positions, per-slice means), so probe g's arithmetic is
// the same whatever G is.
struct ProbeStack {
  bool pooled = false, mlp = false;
  torch::Tensor scores, proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b;
  std::vector<torch::Tensor> All() const {
    std::vector<torch::Tensor> v;
    if (pooled) v.push_back(scores);
    v.insert(v.end(), {proj_w, proj_b, fc1_w, fc1_b});
    if (mlp) v.insert(v.end(), {fc2_w, fc2_b});
    return v;
  }
  // x: [G, B, H, T] (pooled: positions last, see FitGradientProbes) or [G, B, H] -> [G, B, m]
  torch::Tensor Forward(const torch::Tensor& x) const {
    // Pooling as one batched matrix-vector product per probe, [B H, T] x [T]: its forward and
    // backward run the same BLAS call on each slice whatever G is. (An einsum's backward with
    // respect to the pooling weights took another path for G = 1 than for G > 1 with OpenBLAS's
    // AVX-512 kernels, and a batched fit then differed from the fit alone in the last bits.)
    torch::Tensor v = x;
    if (pooled) {
      const auto G = x.size(0), B = x.size(1), H = x.size(2), T = x.size(3);
      const auto alpha = torch::softmax(PooledProbeImpl::kScoreScale * scores, 1);
      v = torch::bmm(x.reshape({G, B * H, T}), alpha.unsqueeze(2)).reshape({G, B, H});
    }
    v = torch::baddbmm(proj_b.unsqueeze(1), v, proj_w.transpose(1, 2));
    auto out = torch::baddbmm(fc1_b.unsqueeze(1), v, fc1_w.transpose(1, 2));
    if (!mlp) return out;
    // The learners' fused tanh-GELU, not LibTorch's (a sixth of an MLP probe run's time): the
    // same function to float32 rounding, recorded as probe_config's "mlp_gelu".
    out = learners::FusedGelu(out);
    return torch::baddbmm(fc2_b.unsqueeze(1), out, fc2_w.transpose(1, 2));
  }
};

// G copies of the initial weights PooledProbe draws from `seed` (drawn under a lock: probes are
// fit on several threads at once, and the global generator must give every fit the same draw).
ProbeStack InitialStack(int G, int T, int H, int m, const GradientProbeOptions& o) {
  PooledProbe probe{nullptr};
  {
    static std::mutex init_mutex;
    std::lock_guard<std::mutex> lock(init_mutex);
    torch::manual_seed(o.seed);
    probe = PooledProbe(T, H, m, o);
  }
  auto stack = [G](const torch::Tensor& t) {
    return torch::stack(std::vector<torch::Tensor>(G, t.detach())).set_requires_grad(true);
  };
  ProbeStack s;
  s.pooled = o.pooled;
  s.mlp = o.mlp;
  if (o.pooled) s.scores = stack(probe->scores);
  s.proj_w = stack(probe->proj->weight);
  s.proj_b = stack(probe->proj->bias);
  s.fc1_w = stack(probe->fc1->weight);
  s.fc1_b = stack(probe->fc1->bias);
  if (o.mlp) {
    s.fc2_w = stack(probe->fc2->weight);
    s.fc2_b = stack(probe->fc2->bias);
  }
  return s;
}

// The features of the train, validation and test rows, stacked over the G probes.
struct StackedRows {
  torch::Tensor train, val, test;
};

// Standardise each probe's features with its own training statistics (per feature over
// training rows and positions). Each probe's rows are standardised in place and copied into its
// slice of the stacked tensors (pooled: [G, N, H, T], positions last, for ProbeStack::Forward),
// so the large buffers are allocated once: with a layer's states of tens of MB, fresh buffers
// per step of the preparation cost more in page faults than the epochs.
StackedRows StandardisedRows(const std::vector<torch::Tensor>& features, const arma::uvec& train,
                             const arma::uvec& val, const arma::uvec& test,
                             const GradientProbeOptions& o) {
  const int G = features.size(), H = features[0].size(-1);
  const int T = o.pooled ? features[0].size(1) : 1;
  auto stacked = [&](const arma::uvec& rows) {
    const long n = rows.n_elem;
    return o.pooled ? LargeEmpty({G, n, H, T}) : LargeEmpty({G, n, H});
  };
  StackedRows x{stacked(train), stacked(val), stacked(test)};
  torch::NoGradGuard no_grad;
  for (int g = 0; g < G; ++g) {
    auto rows = Rows(features[g], train);
    const auto flat = rows.reshape({-1, H});
    const auto mu = flat.mean(0), sd = flat.std(0, /*unbiased=*/false).clamp_min(1e-6);
    auto put = [&](torch::Tensor&& rows_g, torch::Tensor& into) {
      rows_g.sub_(mu).div_(sd);
      into[g].copy_(o.pooled ? rows_g.transpose(1, 2) : rows_g);
    };
    put(std::move(rows), x.train);
    put(Rows(features[g], val), x.val);
    put(Rows(features[g], test), x.test);
  }
  return x;
}

// Adam on the stacked probes (elementwise: each probe takes its own steps) with early stopping
// per probe: a probe whose validation loss has not improved for `patience` epochs keeps its best
// weights and stops counting; the others go on (the stopped one's slice goes on changing,
// unread). The loop ends when every probe has stopped; the probes are left at their best
// weights. Returns each probe's epochs.
std::vector<int> TrainWithEarlyStopping(ProbeStack& probe, const StackedRows& x,
                                        const torch::Tensor& ytr, const torch::Tensor& yva,
                                        const GradientProbeOptions& o) {
  const int G = x.train.size(0);
  // The shuffles come from a generator of our own, seeded like the initial weights.
  at::Generator shuffle = at::detail::createCPUGenerator(o.seed ^ 0x5bd1e995ULL);
  torch::optim::Adam opt(probe.All(), torch::optim::AdamOptions(o.lr));
  const long n = x.train.size(1);
  std::vector<double> best(G, std::numeric_limits<double>::infinity());
  std::vector<int> since_best(G, 0), epochs(G, o.max_epochs);
  std::vector<bool> stopped(G, false);
  std::vector<std::vector<torch::Tensor>> best_params(G);
  int active = G;
  for (int epoch = 1; epoch <= o.max_epochs && active > 0; ++epoch) {
    const auto perm = torch::randperm(n, shuffle, torch::kInt64);
    for (long b = 0; b < n; b += o.batch) {
      const auto idx = perm.slice(0, b, std::min(n, b + o.batch));
      opt.zero_grad();
      const auto diff = probe.Forward(x.train.index_select(1, idx)) - ytr.index_select(0, idx);
      // The sum over probes of each one's mean squared error: probe g's gradient is that of its
      // own loss.
      diff.pow(2).mean({1, 2}).sum().backward();
      opt.step();
    }
    torch::NoGradGuard no_grad;
    const auto v =
        (probe.Forward(x.val) - yva).pow(2).mean({1, 2}).to(torch::kFloat64).contiguous();
    for (int g = 0; g < G; ++g) {
      if (stopped[g]) continue;
      const double vg = v[g].item<double>();
      if (vg < best[g] - 1e-7) {
        best[g] = vg;
        since_best[g] = 0;
        best_params[g].clear();
        for (const auto& p : probe.All())
          best_params[g].push_back(p[g].detach().clone());
      } else if (++since_best[g] >= o.patience) {
        stopped[g] = true;
        epochs[g] = epoch;
        --active;
      }
    }
  }
  // A probe whose validation loss was never finite diverged: there is nothing to report.
  for (int g = 0; g < G; ++g)
    if (best_params[g].empty())
      throw std::runtime_error("probe: the validation loss was never finite in " +
                               std::to_string(o.max_epochs) + " epochs (diverged; learning rate " +
                               std::to_string(o.lr) + " too large?)");
  torch::NoGradGuard no_grad;
  auto params = probe.All();
  for (std::size_t i = 0; i < params.size(); ++i)
    for (int g = 0; g < G; ++g)
      params[i][g].copy_(best_params[g][i]);
  return epochs;
}

// Each probe's test errors and predictions in target units (the targets were standardised by
// ymu, ysd), its validation error per entry and its pooling weights.
std::vector<GradientFit> TestFits(const ProbeStack& probe, const StackedRows& x,
                                  const torch::Tensor& yva, const arma::mat& targets,
                                  const arma::uvec& test, const arma::vec& ymu,
                                  const arma::vec& ysd, const std::vector<int>& epochs,
                                  const GradientProbeOptions& o) {
  torch::NoGradGuard no_grad;
  const int G = x.test.size(0), m = targets.n_rows;
  const auto pred = probe.Forward(x.test).to(torch::kFloat64).contiguous();  // [G, b, m]
  // Each entry's validation error at the kept weights, in target units.
  const auto val_err = (probe.Forward(x.val) - yva).pow(2).mean(1).to(torch::kFloat64).contiguous();
  const arma::mat ytest = targets.cols(test);
  arma::mat centred = ytest;
  centred.each_col() -= arma::vec(arma::mean(ytest, 1));
  const arma::vec row_sst = arma::sum(arma::square(centred), 0).t();
  std::vector<GradientFit> fits(G);
  for (int g = 0; g < G; ++g) {
    GradientFit& fit = fits[g];
    fit.epochs = epochs[g];
    arma::mat yhat(pred[g].data_ptr<double>(), m, test.n_elem);  // [b, m] == m x b
    yhat.each_col() %= ysd;
    yhat.each_col() += ymu;
    fit.test.row_sse = arma::sum(arma::square(ytest - yhat), 0).t();
    fit.test.row_sst = row_sst;
    fit.test.sse = arma::accu(fit.test.row_sse);
    fit.test.sst = arma::accu(row_sst);
    fit.test.rows = test.n_elem;
    fit.test.dims = m;
    fit.test_predictions = yhat;
    fit.val_mse = arma::vec(val_err[g].data_ptr<double>(), m) % arma::square(ysd);
    if (o.pooled) {
      const auto a = torch::softmax(PooledProbeImpl::kScoreScale * probe.scores[g], 0)
                         .to(torch::kFloat64)
                         .contiguous();
      fit.alpha = arma::vec(a.data_ptr<double>(), a.numel());
    }
  }
  return fits;
}

}  // namespace

std::vector<GradientFit> FitGradientProbes(const std::vector<torch::Tensor>& features,
                                           const arma::mat& targets, const arma::uvec& train,
                                           const arma::uvec& val, const arma::uvec& test,
                                           const GradientProbeOptions& o) {
  if (features.empty()) return {};
  const int G = features.size(), H = features[0].size(-1), m = targets.n_rows;
  const int T = o.pooled ? features[0].size(1) : 1;
  for (const auto& f : features)
    if (f.sizes() != features[0].sizes())
      throw std::logic_error("probe: batched probes need features of one shape");
  // Features standardised per probe; targets are shared, standardised once.
  const StackedRows x = StandardisedRows(features, train, val, test, o);
  const arma::vec ymu = arma::mean(targets.cols(train), 1);
  arma::vec ysd = arma::stddev(targets.cols(train), 1, 1);
  ysd.transform([](double v) { return v > 1e-12 ? v : 1.0; });
  arma::mat yz = targets;
  yz.each_col() -= ymu;
  yz.each_col() /= ysd;
  const auto ytr = TargetRows(yz, train), yva = TargetRows(yz, val);

  ProbeStack probe = InitialStack(G, T, H, m, o);
  const std::vector<int> epochs = TrainWithEarlyStopping(probe, x, ytr, yva, o);
  return TestFits(probe, x, yva, targets, test, ymu, ysd, epochs, o);
}

GradientFit FitGradientProbe(const torch::Tensor& features, const arma::mat& targets,
                             const arma::uvec& train, const arma::uvec& val, const arma::uvec& test,
                             const GradientProbeOptions& o) {
  return FitGradientProbes({features}, targets, train, val, test, o).at(0);
}

std::vector<Codelength> GradientCodelengths(const std::vector<torch::Tensor>& features,
                                            const arma::mat& targets, const arma::uvec& train,
                                            const arma::uvec& val,
                                            const std::vector<std::int64_t>& ends,
                                            const GradientProbeOptions& o,
                                            const CodelengthOptions& code) {
  const std::size_t B = ends.size(), G = features.size();
  if (B < 2 || ends.back() != std::int64_t(train.n_elem))
    throw std::logic_error("codelength: blocks that do not cover the training rows");
  // The reference code and block 0: the ridge code without features.
  std::vector<FeatureStats> none(B);
  std::vector<TargetStats> stats(B);
  std::int64_t start = 0;
  for (std::size_t i = 0; i < B; ++i) {
    const arma::mat y = targets.cols(train.subvec(start, ends[i] - 1));
    none[i].Init(0);
    none[i].Add(arma::mat(0, y.n_cols));
    stats[i].Init(0, targets.n_rows);
    stats[i].Add(arma::mat(0, y.n_cols), y);
    start = ends[i];
  }
  const Codelength reference = RidgeCodelength(none, stats, code);
  const arma::mat y0 = targets.cols(train.head(ends[0]));
  const arma::vec s0sq = arma::var(y0, /*norm_type=*/1, /*dim=*/1);
  const arma::vec floor = arma::square(code.precision * arma::sqrt(s0sq));
  const double log2_cells = 0.5 * arma::accu(arma::log2(floor));  // sum_j log2(Delta_j)
  std::vector<Codelength> out(G);
  for (auto& c : out) {
    c.uniform_block_bits = reference.uniform_block_bits;
    c.uniform_bits = reference.uniform_bits;
    c.block_bits.zeros(B);
    c.block_bits(0) = reference.block_bits(0);
    c.block_lambda.set_size(B);
    c.block_lambda.fill(arma::datum::nan);
  }
  for (std::size_t i = 1; i < B; ++i) {
    const arma::uvec prefix = train.head(ends[i - 1]);
    const arma::uvec block = train.subvec(ends[i - 1], ends[i] - 1);
    // Each prefix gets the optimiser steps (and the patience, in steps) of a fit on every
    // training row, so a short code measures how few examples the probe needs, not how few
    // steps a small prefix's epochs would give it.
    const auto steps = [&](std::int64_t rows) { return (rows + o.batch - 1) / o.batch; };
    const std::int64_t scale = steps(std::int64_t(train.n_elem)) / steps(ends[i - 1]);
    GradientProbeOptions oi = o;
    oi.max_epochs = int(std::min<std::int64_t>(std::int64_t(o.max_epochs) * scale, 1 << 20));
    oi.patience = int(std::min<std::int64_t>(std::int64_t(o.patience) * scale, 1 << 20));
    const std::vector<GradientFit> fits =
        FitGradientProbes(features, targets, prefix, val, block, oi);
    const arma::mat y = targets.cols(block);
    for (std::size_t g = 0; g < G; ++g) {
      const arma::vec var = arma::max(fits[g].val_mse, floor);
      const arma::mat r = y - fits[g].test_predictions;
      // sum over rows and entries of -log N(y; yhat, var_j), in nats
      const double nats =
          0.5 * double(block.n_elem) * arma::accu(1.8378770664093453 + arma::log(var)) +
          0.5 * arma::accu(arma::sum(arma::square(r), 1) / var);
      out[g].block_bits(i) = nats / std::log(2.0) - double(block.n_elem) * log2_cells;
    }
  }
  for (auto& c : out) {
    c.bits = arma::accu(c.block_bits);
    if (!std::isfinite(c.bits))
      throw core::InputError("probe", "", "a gradient probe's codelength is not finite");
  }
  return out;
}

}  // namespace icl::probes
