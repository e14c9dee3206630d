// Ridge probe: sufficient statistics, eigendecomposition, exact leave-one-out.
#include "probes/ridge.hpp"

#include "core/dist.hpp"
#include "core/errors.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace icl::probes {

void FeatureStats::Init(arma::uword p) {
  count = 0;
  sx.zeros(p);
  sxx.zeros(p, p);
}

void FeatureStats::Add(const arma::mat& x) {
  count += x.n_cols;
  sx += arma::sum(x, 1);
  sxx += x * x.t();
}

void FeatureStats::Merge(const FeatureStats& o) {
  count += o.count;
  sx += o.sx;
  sxx += o.sxx;
}

void TargetStats::Init(arma::uword p, arma::uword m) {
  count = 0;
  sy.zeros(m);
  sxy.zeros(p, m);
  syy = 0;
  syy_entries.zeros(m);
}

void TargetStats::Add(const arma::mat& x, const arma::mat& y) {
  count += x.n_cols;
  sy += arma::sum(y, 1);
  sxy += x * y.t();
  syy += arma::accu(arma::square(y));
  syy_entries += arma::sum(arma::square(y), 1);
}

void TargetStats::Merge(const TargetStats& o) {
  count += o.count;
  sy += o.sy;
  sxy += o.sxy;
  syy += o.syy;
  syy_entries += o.syy_entries;
}

void SumOverRanks(std::vector<FeatureStats>& features, std::vector<TargetStats>& targets) {
  if (dist::Size() == 1) return;
  // One reduction for all: counts (exact in doubles below 2^53), then every sum.
  std::vector<double> all;
  auto put = [&](const auto& m) { all.insert(all.end(), m.begin(), m.end()); };
  for (const auto& f : features) {
    all.push_back(double(f.count));
    put(f.sx);
    put(f.sxx);
  }
  for (const auto& t : targets) {
    all.push_back(double(t.count));
    put(t.sy);
    put(t.sxy);
    all.push_back(t.syy);
    put(t.syy_entries);
  }
  dist::Sum(all.data(), all.size());
  std::size_t at = 0;
  auto take = [&](auto& m) {
    std::copy(all.begin() + at, all.begin() + at + m.n_elem, m.begin());
    at += m.n_elem;
  };
  for (auto& f : features) {
    f.count = static_cast<std::int64_t>(all[at++]);
    take(f.sx);
    take(f.sxx);
  }
  for (auto& t : targets) {
    t.count = static_cast<std::int64_t>(all[at++]);
    take(t.sy);
    take(t.sxy);
    t.syy = all[at++];
    take(t.syy_entries);
  }
}

RidgeProbe::RidgeProbe(arma::vec lambdas, bool standardize)
    : lambdas_(std::move(lambdas)), standardize_(standardize) {
  if (lambdas_.is_empty()) throw core::InputError("ridge", "", "empty lambda grid");
  for (double l : lambdas_)
    if (!(l >= 0) || !std::isfinite(l))
      throw core::InputError("ridge", "", "lambdas must be finite and >= 0");
}

void RidgeProbe::Prepare(const FeatureStats& train) {
  n_ = train.count;
  const arma::uword p = train.sx.n_elem;
  if (n_ < 2) throw core::InputError("ridge", "", "fewer than 2 training rows");
  mu_ = train.sx / double(n_);
  arma::mat c = train.sxx - double(n_) * mu_ * mu_.t();  // centred X^T X
  sigma_.ones(p);
  if (standardize_) {
    const arma::vec var = arma::clamp(c.diag() / double(n_), 0.0, arma::datum::inf);
    const double scale = std::max(var.max(), 1e-300);
    for (arma::uword j = 0; j < p; ++j)
      sigma_(j) = var(j) > 1e-12 * scale ? std::sqrt(var(j)) : 1.0;
    c.each_col() /= sigma_;
    c.each_row() /= sigma_.t();
  }
  c = arma::symmatu(c);
  if (!arma::eig_sym(eigval_, eigvec_, c))
    throw std::runtime_error("ridge: eigendecomposition failed");
  eigval_ = arma::clamp(eigval_, 0.0, arma::datum::inf);
  if (lambdas_.min() == 0 &&
      (n_ <= static_cast<std::int64_t>(p) || eigval_.min() <= 1e-10 * eigval_.max()))
    throw core::InputError(
        "ridge", "",
        std::to_string(n_) + " training prompts for " + std::to_string(p) +
            " features and lambda = 0 in the grid: the fit is not unique; use lambdas > 0");
}

void RidgeProbe::Begin(const TargetStats& train) {
  ybar_ = train.sy / double(n_);
  // Z^T (Y - ybar) = D^{-1} (S_xy - N mu ybar^T)
  arma::mat zty = train.sxy - double(n_) * mu_ * ybar_.t();
  zty.each_col() /= sigma_;
  beta_ = eigvec_.t() * zty;
  loo_sum_.zeros(lambdas_.n_elem);
  heldout_sse_.zeros(lambdas_.n_elem);
  heldout_rows_.clear();
  loo_rows_ = 0;
}

void RidgeProbe::AccumulateHeldOut(arma::mat x, const arma::mat& y) {
  x.each_col() -= mu_;
  x.each_col() /= sigma_;
  const arma::mat q = eigvec_.t() * x;
  arma::mat yc = y;
  yc.each_col() -= ybar_;
  // Every lambda's predictions in one product (q packed once; each entry the same dot product
  // as in a product of its own): columns l m .. l m + m - 1 of bg hold beta / (eigval + lambda_l).
  const arma::uword m = beta_.n_cols, L = lambdas_.n_elem;
  arma::mat bg(beta_.n_rows, L * m);
  for (arma::uword l = 0; l < L; ++l) {
    bg.cols(l * m, l * m + m - 1) = beta_;
    bg.cols(l * m, l * m + m - 1).each_col() /= (eigval_ + lambdas_(l));
  }
  const arma::mat fits = bg.t() * q;  // (L m) x b
  arma::mat rows(L, x.n_cols);
  for (arma::uword l = 0; l < L; ++l) {
    rows.row(l) = arma::sum(arma::square(yc - fits.rows(l * m, l * m + m - 1)), 0);
    heldout_sse_(l) += arma::accu(rows.row(l));
  }
  heldout_rows_.push_back(std::move(rows));
}

arma::vec RidgeProbe::held_out_row_sse() const {
  arma::uword n = 0;
  for (const auto& b : heldout_rows_)
    n += b.n_cols;
  arma::vec out(n);
  arma::uword at = 0;
  for (const auto& b : heldout_rows_) {
    if (b.n_cols) out.subvec(at, at + b.n_cols - 1) = b.row(best_).t();
    at += b.n_cols;
  }
  return out;
}

void RidgeProbe::AccumulateLoo(arma::mat x, const arma::mat& y) {
  x.each_col() -= mu_;
  x.each_col() /= sigma_;
  const arma::mat q = eigvec_.t() * x;  // p x b
  const arma::mat q2 = arma::square(q);
  arma::mat yc = y;
  yc.each_col() -= ybar_;
  // Every lambda's fitted values in one product, so q is packed once rather than once per
  // lambda: columns l m .. l m + m - 1 of bg hold beta o g_l, g_l = 1 / (eigval + lambda_l), and
  // rows l m .. l m + m - 1 of bg^T q are lambda_l's fits (each entry the same length-p dot
  // product, in the same order, as a product of its own).
  const arma::uword m = beta_.n_cols, L = lambdas_.n_elem;
  arma::mat g(eigval_.n_elem, L), bg(beta_.n_rows, L * m);
  for (arma::uword l = 0; l < L; ++l) {
    g.col(l) = 1.0 / (eigval_ + lambdas_(l));
    bg.cols(l * m, l * m + m - 1) = beta_;
    bg.cols(l * m, l * m + m - 1).each_col() %= g.col(l);
  }
  const arma::mat fits = bg.t() * q;  // (L m) x b
  for (arma::uword l = 0; l < L; ++l) {
    // Leverage of each row, one lambda at a time: a product of all lambdas at once (gemm, not
    // gemv) sums in another order and changes the last bits of the leave-one-out errors.
    const arma::rowvec h = 1.0 / double(n_) + g.col(l).t() * q2;
    const arma::mat resid = yc - fits.rows(l * m, l * m + m - 1);  // m x b
    const arma::rowvec r2 = arma::sum(arma::square(resid), 0);
    loo_sum_(l) += arma::accu(r2 / arma::square(1.0 - h));
  }
  loo_rows_ += x.n_cols;
}

void RidgeProbe::CombineRanks() {
  if (dist::Size() == 1) return;
  const arma::uword L = lambdas_.n_elem;
  std::vector<double> sums(loo_sum_.begin(), loo_sum_.end());
  sums.insert(sums.end(), heldout_sse_.begin(), heldout_sse_.end());
  sums.push_back(double(loo_rows_));
  dist::Sum(sums.data(), sums.size());
  std::copy(sums.begin(), sums.begin() + L, loo_sum_.begin());
  std::copy(sums.begin() + L, sums.begin() + 2 * L, heldout_sse_.begin());
  loo_rows_ = static_cast<std::int64_t>(sums[2 * L]);
  // The held-out rows of every rank, in rank order (= row order): lambdas x rows each.
  arma::uword rows = 0;
  for (const auto& b : heldout_rows_)
    rows += b.n_cols;
  std::vector<std::uint8_t> mine(rows * L * sizeof(double));
  std::size_t at = 0;
  for (const auto& b : heldout_rows_) {
    std::memcpy(mine.data() + at, b.memptr(), b.n_elem * sizeof(double));
    at += b.n_elem * sizeof(double);
  }
  const std::vector<std::uint8_t> all = dist::Gather(mine);
  arma::mat joined(L, all.size() / (L * sizeof(double)));
  std::memcpy(joined.memptr(), all.data(), all.size());
  heldout_rows_.assign(1, std::move(joined));
}

void RidgeProbe::Select() {
  if (loo_rows_ != n_)
    throw std::logic_error("ridge: leave-one-out pass saw " + std::to_string(loo_rows_) +
                           " rows, expected " + std::to_string(n_));
  loo_ = loo_sum_ / (double(n_) * beta_.n_cols);
  best_ = loo_.index_min();
  lambda_ = lambdas_(best_);
  arma::mat wz = beta_;
  wz.each_col() /= (eigval_ + lambda_);
  w_ = eigvec_ * wz;  // on standardised features
  w_.each_col() /= sigma_;
  b_ = ybar_ - w_.t() * mu_;
}

arma::mat RidgeProbe::Predict(const arma::mat& x) const {
  arma::mat out = w_.t() * x;
  out.each_col() += b_;
  return out;
}

void RidgeProbe::AccumulateErrors(const arma::mat& x, const arma::mat& y, const arma::vec& center,
                                  Errors& e) const {
  e.sse += arma::accu(arma::square(y - Predict(x)));
  arma::mat yc = y;
  yc.each_col() -= center;
  e.sst += arma::accu(arma::square(yc));
  e.rows += x.n_cols;
  e.dims = y.n_rows;
}

}  // namespace icl::probes
