// Pooled linear / MLP probes trained with LibTorch.
#include "probes/gradient.hpp"

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
  return fc2(torch::gelu(fc1(v), /*approximate=*/"tanh"));
}

torch::Tensor PooledProbeImpl::Alpha(bool detach) const {
  if (!pooled) return torch::Tensor();
  // alpha = softmax(10 s): the factor lets Adam move the pooling logits ten times faster than
  // the weights, so that pooling concentrates within a few hundred steps.
  return torch::softmax(kScoreScale * (detach ? scores.detach() : scores), /*dim=*/0);
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

GradientFit FitGradientProbe(const torch::Tensor& features, const arma::mat& targets,
                             const arma::uvec& train, const arma::uvec& val, const arma::uvec& test,
                             const GradientProbeOptions& o) {
  const int H = features.size(-1), m = targets.n_rows;
  const int T = o.pooled ? features.size(1) : 1;

  // Standardise with training statistics only (per feature over training rows and positions).
  auto xtr = Rows(features, train);
  const auto flat = xtr.reshape({-1, H});
  const auto mu = flat.mean(0), sd = flat.std(0, /*unbiased=*/false).clamp_min(1e-6);
  auto standardise = [&](const torch::Tensor& x) { return (x - mu) / sd; };
  xtr = standardise(xtr);
  const auto xva = standardise(Rows(features, val)), xte = standardise(Rows(features, test));
  const arma::vec ymu = arma::mean(targets.cols(train), 1);
  arma::vec ysd = arma::stddev(targets.cols(train), 1, 1);
  ysd.transform([](double v) { return v > 1e-12 ? v : 1.0; });
  arma::mat yz = targets;
  yz.each_col() -= ymu;
  yz.each_col() /= ysd;
  const auto ytr = TargetRows(yz, train), yva = TargetRows(yz, val);

  // Probes are fit on several threads at once: initialise under a lock from the seed, and
  // shuffle with a generator of our own, so that every fit is reproducible whatever runs beside it.
  PooledProbe probe{nullptr};
  {
    static std::mutex init_mutex;
    std::lock_guard<std::mutex> lock(init_mutex);
    torch::manual_seed(o.seed);
    probe = PooledProbe(T, H, m, o);
  }
  at::Generator shuffle = at::detail::createCPUGenerator(o.seed ^ 0x5bd1e995ULL);
  torch::optim::Adam opt(probe->parameters(), torch::optim::AdamOptions(o.lr));
  const long n = xtr.size(0);
  double best = std::numeric_limits<double>::infinity();
  std::vector<torch::Tensor> best_params;
  int since_best = 0, epoch = 0;
  for (epoch = 1; epoch <= o.max_epochs; ++epoch) {
    const auto perm = torch::randperm(n, shuffle, torch::kInt64);
    probe->train();
    for (long b = 0; b < n; b += o.batch) {
      const auto idx = perm.slice(0, b, std::min(n, b + o.batch));
      opt.zero_grad();
      const auto loss = torch::mse_loss(probe(xtr.index_select(0, idx)), ytr.index_select(0, idx));
      loss.backward();
      opt.step();
    }
    torch::NoGradGuard no_grad;
    probe->eval();
    const double v = torch::mse_loss(probe(xva), yva).item<double>();
    if (v < best - 1e-7) {
      best = v;
      since_best = 0;
      best_params.clear();
      for (const auto& p : probe->parameters())
        best_params.push_back(p.detach().clone());
    } else if (++since_best >= o.patience) {
      break;
    }
  }
  // No epoch gave a finite validation loss: the fit diverged, and there is nothing to report.
  if (best_params.empty())
    throw std::runtime_error("probe: the validation loss was never finite in " +
                             std::to_string(std::min(epoch, o.max_epochs)) +
                             " epochs (diverged; learning rate " + std::to_string(o.lr) +
                             " too large?)");
  {
    torch::NoGradGuard no_grad;
    auto params = probe->parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].copy_(best_params[i]);
  }

  GradientFit fit;
  fit.epochs = std::min(epoch, o.max_epochs);
  torch::NoGradGuard no_grad;
  probe->eval();
  const auto pred = probe(xte).to(torch::kFloat64).contiguous();  // [b, m] == m x b
  arma::mat yhat(pred.data_ptr<double>(), m, test.n_elem);
  yhat.each_col() %= ysd;
  yhat.each_col() += ymu;
  const arma::mat ytest = targets.cols(test);
  arma::mat centred = ytest;
  centred.each_col() -= arma::vec(arma::mean(ytest, 1));
  fit.test.row_sse = arma::sum(arma::square(ytest - yhat), 0).t();
  fit.test.row_sst = arma::sum(arma::square(centred), 0).t();
  fit.test.sse = arma::accu(fit.test.row_sse);
  fit.test.sst = arma::accu(fit.test.row_sst);
  fit.test.rows = test.n_elem;
  fit.test.dims = m;
  if (o.pooled) {
    const auto a = probe->Alpha().to(torch::kFloat64).contiguous();
    fit.alpha = arma::vec(a.data_ptr<double>(), a.numel());
  }
  return fit;
}

}  // namespace icl::probes
