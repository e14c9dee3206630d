// The task families' Bayes-optimal learners.
#include "learners/task_family_learners.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/output.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace icl::learners {

namespace {

// One Gaussian hypothesis about a prompt (w ~ N(0, tau^2 I) on the columns of G = X'X, b = X'y,
// noise sigma > 0): its log evidence up to the k log(2 pi) / 2 every hypothesis shares, and its
// posterior mean, ridge with lambda = sigma^2 / tau^2 (the class comment gives the algebra).
struct Hypothesis {
  double log_evidence = 0;
  arma::vec w;
};
Hypothesis Evidence(const arma::mat& G, const arma::vec& b, double yy, double k, double sigma,
                    double tau) {
  const double lambda = sigma * sigma / (tau * tau);
  arma::mat A = G;
  A.diag() += lambda;
  arma::mat L;
  if (!arma::chol(L, A, "lower"))
    throw std::runtime_error("learners: X'X + lambda I is not positive definite (lambda " +
                             std::to_string(lambda) + ")");
  Hypothesis h;
  h.w = arma::solve(arma::trimatu(L.t()), arma::solve(arma::trimatl(L), b));
  const double log_det = 2 * arma::accu(arma::log(L.diag()));
  h.log_evidence =
      -0.5 * (k * std::log(sigma * sigma) + log_det - double(G.n_rows) * std::log(lambda) +
              (yy - arma::dot(b, h.w)) / (sigma * sigma));
  return h;
}

// The moments of the examples seen so far, grown one example at a time: G = X'X, b = X'y, y'y.
struct Moments {
  explicit Moments(arma::uword d) : G(d, d, arma::fill::zeros), b(d, arma::fill::zeros) {}
  void Add(const arma::vec& xj, double yj) {
    G += xj * xj.t();
    b += yj * xj;
    yy += yj * yj;
  }
  arma::mat G;
  arma::vec b;
  double yy = 0;
};

// exp(v - max v) / sum: a posterior from log weights.
arma::vec Normalised(const arma::vec& log_weights) {
  const arma::vec e = arma::exp(log_weights - log_weights.max());
  return e / arma::accu(e);
}

}  // namespace

DmmseLearner::DmmseLearner(arma::mat pool, double sigma, std::string spec)
    : pool_(std::move(pool)), sigma_(sigma), spec_(std::move(spec)) {
  if (pool_.n_cols == 0) throw std::logic_error("DmmseLearner: an empty pool");
  if (!(sigma_ >= 0) || !std::isfinite(sigma_))
    throw std::logic_error("DmmseLearner: sigma must be finite and >= 0");
}

// The noiseless limit: the members consistent with every example so far (residual sum within
// 1e-12 of y'y of the least), equally weighted.
static void NoiselessDmmse(const arma::mat& pool, const arma::mat& x, const arma::vec& y,
                           LearnerRun& out) {
  const arma::uword n = x.n_cols, M = pool.n_cols;
  const arma::mat P = pool.t() * x;  // P(m, j) = w_m' x_j
  arma::mat post(M, n);
  arma::vec R(M, arma::fill::zeros);  // R_m(k)
  double yy = 0;                      // sum of y_j^2 over the examples so far
  for (arma::uword k = 0; k < n; ++k) {
    if (k > 0) {
      R += arma::square(y(k - 1) - P.col(k - 1));
      yy += y(k - 1) * y(k - 1);
    }
    double* p = post.colptr(k);
    const double tie = R.min() + 1e-12 * yy;
    double count = 0;
    for (arma::uword m = 0; m < M; ++m)
      count += (p[m] = R(m) <= tie ? 1.0 : 0.0);
    for (arma::uword m = 0; m < M; ++m)
      p[m] /= count;
  }
  out.weights = pool * post;
  out.predictions.set_size(n);
  for (arma::uword k = 0; k < n; ++k)
    out.predictions(k) = arma::dot(post.col(k), P.col(k));
}

// sigma > 0: p_m(k) = exp(-R_m(k) / 2 sigma^2) / Z(k), R_m(k) = sum_{j<k} (y_j - w_m' x_j)^2,
// computed one block of members at a time with the normalisation carried along, as a softmax is
// computed in one pass: per k the least R so far, the sum Z of the weights relative to it, and
// the weighted sums of the members and of their predictions; when a block lowers the least, what
// is summed so far is scaled by exp(-(old - new) / 2 sigma^2).
// A member whose weight is below exp(-cut) of the best one's, cut = 53 ln 2 + ln M, i.e. whose
// R_m(k) exceeds the least R(k) by cut 2 sigma^2 or more, is left out: all M of them together
// weigh less than 2^-53 of the best, so less than 2^-53 of Z, below the rounding of the sums
// themselves. R_m(k) only grows with k and the least R(k) is at most U, the least R(n - 1) found
// so far, so a member whose R_m(k) reaches U + cut 2 sigma^2 is left out at every later k too,
// and neither its products w_m' x_j nor its residuals are computed further: after a few examples
// nearly every member of a large pool is, which leaves a few products and exponentials per member
// as the cost, instead of the n products of each.
void DmmseLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  if (sigma_ == 0) return NoiselessDmmse(pool_, x, y, out);
  const arma::uword d = x.n_rows, n = x.n_cols, M = pool_.n_cols;
  constexpr arma::uword kBlock = 1024;
  const double scale = 1.0 / (2 * sigma_ * sigma_);
  const double margin = (53 * std::log(2.0) + std::log(double(M))) / scale;  // cut 2 sigma^2
  arma::vec least(n);
  least.fill(std::numeric_limits<double>::infinity());
  arma::vec z(n, arma::fill::zeros), predicted(n, arma::fill::zeros);
  arma::mat summed(d, n, arma::fill::zeros);  // column k: sum of p_m(k) Z(k) w_m
  // The block's members still within reach, their R_m(k) and their w_m' x_k, in one order.
  std::vector<arma::uword> alive(kBlock);
  std::vector<double> R(kBlock), f(kBlock);
  const arma::uword first = std::min<arma::uword>(n, 4);
  arma::mat P;  // the block's w_m' x_k for k < first, b x first
  for (arma::uword m0 = 0; m0 < M; m0 += kBlock) {
    const arma::uword b = std::min(kBlock, M - m0);
    // The first few k, where most members are still within reach, take their products from one
    // product of matrices; the later ones member by member.
    P = pool_.cols(m0, m0 + b - 1).t() * x.cols(0, first - 1);
    arma::uword count = b;
    for (arma::uword i = 0; i < b; ++i)
      alive[i] = m0 + i, R[i] = 0;
    const double reach = least(n - 1) + margin;  // U + cut 2 sigma^2 (infinite on the first block)
    for (arma::uword k = 0; k < n && count > 0; ++k) {
      if (k > 0) {
        const double yk = y(k - 1);
        arma::uword kept = 0;
        for (arma::uword i = 0; i < count; ++i) {
          const double r = R[i] + (yk - f[i]) * (yk - f[i]);
          alive[kept] = alive[i], R[kept] = r;
          kept += r < reach ? 1 : 0;
        }
        count = kept;
        if (count == 0) break;
      }
      if (k < first) {
        const double* p = P.colptr(k);
        for (arma::uword i = 0; i < count; ++i)
          f[i] = p[alive[i] - m0];
      } else {
        const double* xk = x.colptr(k);
        for (arma::uword i = 0; i < count; ++i) {
          const double* member = pool_.colptr(alive[i]);
          double dot = 0;
          for (arma::uword j = 0; j < d; ++j)
            dot += member[j] * xk[j];
          f[i] = dot;
        }
      }
      const double block_least = *std::min_element(R.begin(), R.begin() + count);
      if (block_least < least(k)) {
        const double shrink = std::exp(-(least(k) - block_least) * scale);  // 0 on the first block
        if (z(k) > 0) z(k) *= shrink, predicted(k) *= shrink, summed.col(k) *= shrink;
        least(k) = block_least;
      }
      const double within = least(k) + margin;
      double* s = summed.colptr(k);
      double zk = 0, pk = 0;
      for (arma::uword i = 0; i < count; ++i) {
        if (!(R[i] < within)) continue;
        // exp(0) = 1 needs no call: every member at k = 0, and the best one at each k.
        const double w = R[i] == least(k) ? 1.0 : std::exp(-(R[i] - least(k)) * scale);
        const double* member = pool_.colptr(alive[i]);
        zk += w, pk += w * f[i];
        for (arma::uword j = 0; j < d; ++j)
          s[j] += w * member[j];
      }
      z(k) += zk, predicted(k) += pk;
    }
  }
  out.weights = summed.each_row() / z.t();
  out.predictions = predicted / z;
}

BayesMixLearner::BayesMixLearner(std::vector<double> sigmas, std::vector<double> probs, double tau,
                                 std::string spec)
    : sigmas_(std::move(sigmas)), probs_(std::move(probs)), tau_(tau), spec_(std::move(spec)) {
  if (probs_.empty()) probs_.assign(sigmas_.size(), 1.0 / double(sigmas_.size()));
  if (sigmas_.empty() || probs_.size() != sigmas_.size())
    throw std::logic_error("BayesMixLearner: one probability per noise level");
}

arma::mat BayesMixLearner::Posterior(const arma::mat& x, const arma::vec& y) const {
  const arma::uword d = x.n_rows, n = x.n_cols, C = sigmas_.size();
  arma::mat post(C, n);
  Moments m(d);
  arma::vec logw(C);
  for (arma::uword k = 0; k < n; ++k) {
    if (k > 0) m.Add(x.col(k - 1), y(k - 1));
    for (arma::uword c = 0; c < C; ++c)
      logw(c) =
          std::log(probs_[c]) + Evidence(m.G, m.b, m.yy, double(k), sigmas_[c], tau_).log_evidence;
    post.col(k) = Normalised(logw);
  }
  return post;
}

void BayesMixLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const arma::uword d = x.n_rows, n = x.n_cols, C = sigmas_.size();
  out.weights.zeros(d, n);
  out.predictions.set_size(n);
  Moments m(d);
  arma::vec logw(C);
  std::vector<arma::vec> w(C);
  for (arma::uword k = 0; k < n; ++k) {
    if (k > 0) m.Add(x.col(k - 1), y(k - 1));
    for (arma::uword c = 0; c < C; ++c) {
      Hypothesis h = Evidence(m.G, m.b, m.yy, double(k), sigmas_[c], tau_);
      logw(c) = std::log(probs_[c]) + h.log_evidence;
      w[c] = std::move(h.w);
    }
    const arma::vec p = Normalised(logw);
    for (arma::uword c = 0; c < C; ++c)
      out.weights.col(k) += p(c) * w[c];
    out.predictions(k) = arma::dot(out.weights.col(k), x.col(k));
  }
}

long long BayesSparseLearner::SupportCount(int used, int sparsity) {
  long long c = 1;  // C(used, s) built up as C(used - sparsity + s, s)
  for (int s = 1; s <= sparsity; ++s) {
    c = c * (used - sparsity + s) / s;
    if (c > kMaxSupports) return -1;
  }
  return c;
}

BayesSparseLearner::BayesSparseLearner(int used, int sparsity, double sigma, double tau,
                                       std::string spec)
    : sigma_(sigma), tau_(tau), spec_(std::move(spec)) {
  if (sparsity < 1 || sparsity > used || SupportCount(used, sparsity) < 0 || !(sigma > 0))
    throw std::logic_error("BayesSparseLearner: a support count or noise MakeLearner refuses");
  // Every increasing S-subset of 0..used-1, in lexicographic order.
  std::vector<arma::uword> t(static_cast<std::size_t>(sparsity));
  for (int i = 0; i < sparsity; ++i)
    t[std::size_t(i)] = arma::uword(i);
  while (true) {
    supports_.push_back(t);
    int i = sparsity - 1;
    while (i >= 0 && t[std::size_t(i)] == arma::uword(used - sparsity + i))
      --i;
    if (i < 0) break;
    ++t[std::size_t(i)];
    for (int j = i + 1; j < sparsity; ++j)
      t[std::size_t(j)] = t[std::size_t(j - 1)] + 1;
  }
}

void BayesSparseLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const arma::uword d = x.n_rows, n = x.n_cols, T = supports_.size();
  out.weights.zeros(d, n);
  out.predictions.set_size(n);
  Moments m(d);
  arma::vec logw(T);
  std::vector<arma::vec> w(T);
  for (arma::uword k = 0; k < n; ++k) {
    if (k > 0) m.Add(x.col(k - 1), y(k - 1));
    for (arma::uword t = 0; t < T; ++t) {
      const arma::uvec cols(supports_[t]);
      Hypothesis h =
          Evidence(m.G.submat(cols, cols), m.b.elem(cols), m.yy, double(k), sigma_, tau_);
      logw(t) = h.log_evidence;
      w[t] = std::move(h.w);
    }
    const arma::vec p = Normalised(logw);
    for (arma::uword t = 0; t < T; ++t) {
      const arma::uvec cols(supports_[t]);
      for (arma::uword i = 0; i < cols.n_elem; ++i)
        out.weights(cols(i), k) += p(t) * w[t](i);
    }
    out.predictions(k) = arma::dot(out.weights.col(k), x.col(k));
  }
}

LassoLearner::LassoLearner(double lambda, std::string spec)
    : lambda_(lambda), spec_(std::move(spec)) {
  if (!(lambda_ > 0) || !std::isfinite(lambda_))
    throw std::logic_error("LassoLearner: lambda must be finite and > 0");
}

double LassoLearner::KktViolation(const arma::mat& G, const arma::vec& b,
                                  const arma::vec& w) const {
  const arma::vec g = b - G * w;
  double worst = 0;
  for (arma::uword i = 0; i < w.n_elem; ++i)
    worst = std::max(worst, w(i) != 0 ? std::abs(g(i) - lambda_ * (w(i) > 0 ? 1 : -1))
                                      : std::max(0.0, std::abs(g(i)) - lambda_));
  return worst;
}

void LassoLearner::Solve(const arma::mat& G, const arma::vec& b, arma::vec& w) const {
  const arma::uword d = G.n_rows;
  const double tolerance = 1e-11 * (1 + arma::abs(b).max());
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    for (arma::uword i = 0; i < d; ++i) {
      if (!(G(i, i) > 0)) {  // a coordinate no example has touched
        w(i) = 0;
        continue;
      }
      const double rho = b(i) - arma::dot(G.col(i), w) + G(i, i) * w(i);
      w(i) = (rho > lambda_ ? rho - lambda_ : rho < -lambda_ ? rho + lambda_ : 0.0) / G(i, i);
    }
    if (KktViolation(G, b, w) <= tolerance) return;
  }
}

void LassoLearner::Run(const arma::mat& x, const arma::vec& y, LearnerRun& out) const {
  const arma::uword d = x.n_rows, n = x.n_cols;
  out.weights.zeros(d, n);
  arma::mat G(d, d, arma::fill::zeros);
  arma::vec b(d, arma::fill::zeros), w(d, arma::fill::zeros);
  for (arma::uword k = 1; k < n; ++k) {
    G += x.col(k - 1) * x.col(k - 1).t();
    b += y(k - 1) * x.col(k - 1);
    Solve(G, b, w);
    out.weights.col(k) = w;
  }
  out.predictions.set_size(n);
  for (arma::uword k = 0; k < n; ++k)
    out.predictions(k) = arma::dot(out.weights.col(k), x.col(k));
}

std::unique_ptr<ClassicalLearner> MakeTaskFamilyLearner(const core::Spec& p,
                                                        const data::TaskConfig& task,
                                                        const data::TaskConfig* trained) {
  const std::string& spec = p.text;
  auto fail = [&](const std::string& expected) {
    throw core::InputError("learners", "learners",
                           "learner spec '" + spec + "': expected " + expected);
  };
  auto arity = [&](std::size_t lo, std::size_t hi, const std::string& expected) {
    if (p.args.size() < lo || p.args.size() > hi) fail(expected);
  };
  if (p.name == "lasso") {
    const std::string form = "lasso:LAMBDA with LAMBDA a positive number, e.g. lasso:0.1";
    arity(1, 1, form);
    const auto lambda = p.Number(0);
    if (!lambda || !(*lambda > 0)) fail(form);
    return std::make_unique<LassoLearner>(*lambda, "lasso:" + p.args[0]);
  }
  if (p.name == "bayes-mix") {
    arity(0, 0, "bayes-mix");
    const data::TaskFamily& f = task.family;
    if (f.kind != data::TaskFamily::Kind::kNoiseMix)
      throw core::InputError("learners", "learners",
                             "bayes-mix is the posterior over a noise mixture's levels, and this "
                             "task's family is " +
                                 f.Spec() +
                                 ": give a noise-mix task ({task_family} noise-mix:...)");
    // sigma / tau below 1e-6 makes X'X + lambda I singular to working precision for k < d.
    for (double sigma : f.sigmas)
      if (!(sigma >= 1e-6 * task.w_scale))
        throw core::InputError("learners", "learners",
                               "bayes-mix needs every noise level at least 1e-6 tau (at sigma "
                               "= 0 the evidence is degenerate); the task's family is " +
                                   f.Spec());
    return std::make_unique<BayesMixLearner>(f.sigmas, f.probs, task.w_scale);
  }
  if (p.name == "oracle-ridge") {
    arity(0, 0, "oracle-ridge");
    if (task.family.kind != data::TaskFamily::Kind::kNoiseMix)
      throw core::InputError("learners", "learners",
                             "oracle-ridge is ridge with each prompt's own noise level, and this "
                             "task's family is " +
                                 task.family.Spec() +
                                 ": give a noise-mix task ({task_family} noise-mix:...)");
    return std::make_unique<OracleRidgeLearner>(task.family.sigmas, task.w_scale);
  }
  if (p.name == "bayes-sparse") {
    arity(0, 0, "bayes-sparse");
    const data::TaskFamily& f = task.family;
    if (f.kind != data::TaskFamily::Kind::kSparse)
      throw core::InputError("learners", "learners",
                             "bayes-sparse is the posterior over the supports of a sparse w, and "
                             "this task's family is " +
                                 f.Spec() + ": give a sparse task ({task_family} sparse:S)");
    if (!(task.noise >= 1e-6 * task.w_scale))
      throw core::InputError("learners", "learners",
                             "bayes-sparse needs label noise of at least 1e-6 tau (at sigma = 0 "
                             "the evidence of the supports is degenerate); give the task a "
                             "{noise}");
    if (BayesSparseLearner::SupportCount(task.EffectiveD(), f.sparsity) < 0)
      throw core::InputError("learners", "learners",
                             "bayes-sparse enumerates the supports, and C(" +
                                 std::to_string(task.EffectiveD()) + ", " +
                                 std::to_string(f.sparsity) + ") is over " +
                                 std::to_string(BayesSparseLearner::kMaxSupports));
    return std::make_unique<BayesSparseLearner>(task.EffectiveD(), f.sparsity, task.noise,
                                                task.w_scale);
  }
  if (p.name == "dmmse") {
    arity(0, 0, "dmmse");
    const bool own = task.family.kind == data::TaskFamily::Kind::kPool;
    if (!own && !(trained && trained->family.kind == data::TaskFamily::Kind::kPool))
      throw core::InputError(
          "learners", "learners",
          "dmmse is the posterior mean over a task's pool, and this task's family is " +
              task.family.Spec() +
              ": give a pool task ({task_family} pool:M) or a checkpoint trained on one");
    const data::TaskConfig& from = own ? task : *trained;
    if (from.d != task.d)
      throw core::InputError("learners", "learners",
                             "dmmse: the training pool has d = " + std::to_string(from.d) +
                                 ", the prompts d = " + std::to_string(task.d));
    core::RequireMemory(8.0 * double(from.family.pool_size) * (from.d + 2 * task.n), "learners",
                        "learners", "dmmse's pool and its per-prompt posterior");
    return std::make_unique<DmmseLearner>(
        data::PoolMembers(from.family, from.d, from.EffectiveD(), from.w_scale), task.noise);
  }
  return nullptr;
}

OracleRidgeLearner::OracleRidgeLearner(const std::vector<double>& sigmas, double tau,
                                       std::string spec)
    : spec_(std::move(spec)) {
  for (double sigma : sigmas) {
    const double lambda = sigma * sigma / (tau * tau);  // sigma = 0: minimum-norm OLS
    levels_.push_back(std::make_unique<RidgeLearner>(lambda, fmt::format("ridge:{:g}", lambda)));
  }
}

void OracleRidgeLearner::Run(const arma::mat&, const arma::vec&, LearnerRun&) const {
  throw core::InputError("learners", "learners",
                         "oracle-ridge needs each prompt's drawn noise level, which only compare "
                         "and baselines pass it; it is not a target or a swap reference");
}

const ClassicalLearner& OracleRidgeLearner::ForLevel(std::int64_t c) const {
  if (c < 0 || c >= static_cast<std::int64_t>(levels_.size()))
    throw std::invalid_argument("oracle-ridge: a prompt drew noise level " + std::to_string(c) +
                                " of " + std::to_string(levels_.size()));
  return *levels_[static_cast<std::size_t>(c)];
}

}  // namespace icl::learners
