// Closed-form ridge readouts from streamed sufficient statistics, with the penalty chosen by
// exact leave-one-out over a grid from one eigendecomposition (no refit per lambda).
#pragma once

#include <armadillo>
#include <cstdint>
#include <vector>

namespace icl::probes {

// Feature statistics of a set of rows: count, sum x, sum x x^T. Features are p-vectors; a block
// of rows is a p x b matrix (Armadillo column-major: one column per row of the HDF5 array).
struct FeatureStats {
  std::int64_t count = 0;
  arma::vec sx;   // p
  arma::mat sxx;  // p x p
  void Init(arma::uword p);
  void Add(const arma::mat& x);
  void Merge(const FeatureStats& other);
};

// Cross statistics with a target: sum y, sum x y^T, sum |y|^2. Targets are m-vectors.
struct TargetStats {
  std::int64_t count = 0;
  arma::vec sy;   // m
  arma::mat sxy;  // p x m
  double syy = 0;
  arma::vec syy_entries;  // m: sum of y_j^2 per entry (the codelength's per-entry variances)
  void Init(arma::uword p, arma::uword m);
  void Add(const arma::mat& x, const arma::mat& y);
  void Merge(const TargetStats& other);
};

// Several ranks (mpirun), each with the statistics of its own rows: every rank gets the sums
// over all rows (collective; a no-op with one rank).
void SumOverRanks(std::vector<FeatureStats>& features, std::vector<TargetStats>& targets);

// Squared-error summaries of predictions on a set of rows.
struct Errors {
  double sse = 0;  // sum over rows and target entries of (y - yhat)^2
  double sst = 0;  // sum of (y - mean_y)^2 with that set's own mean
  std::int64_t rows = 0;
  arma::uword dims = 0;
  // Per row (in row order), when kept: the row's share of sse and of sst. The bootstrap over
  // test prompts resamples these.
  arma::vec row_sse, row_sst;
  double Mse() const { return sse / (double(rows) * dims); }
  double Nmse() const { return sse / sst; }  // 1 = predicting the mean
  double R2() const { return 1.0 - Nmse(); }
};

// Ridge with an unpenalised intercept on standardised features:
//   W(lambda) = (Z^T Z + lambda I)^{-1} Z^T (Y - mean Y),  Z = (X - mu) / sigma (training stats).
// Exact leave-one-out residuals e_i = (y_i - yhat_i) / (1 - h_ii), h_ii = 1/N + z_i^T (Z^T Z +
// lambda I)^{-1} z_i, for every lambda from Z^T Z = V diag(s) V^T.
//
// Use: Prepare(train feature stats) once per feature set; then per target:
//   Begin(target stats); AccumulateLoo(train blocks) [second pass]; Select(); Predict / Evaluate.
class RidgeProbe {
 public:
  explicit RidgeProbe(arma::vec lambdas, bool standardize = true);

  void Prepare(const FeatureStats& train);
  void Begin(const TargetStats& train);
  // Second pass over the training rows (any blocking): adds leave-one-out squared errors per
  // lambda.
  void AccumulateLoo(arma::mat x, const arma::mat& y);  // x: standardised in place
  // Held-out rows (any blocking, same pass): adds their squared error for every lambda, so
  // that test errors need no third pass over the data.
  void AccumulateHeldOut(arma::mat x, const arma::mat& y);
  // Several ranks, each having accumulated its own rows (ranks in row order): sums the errors
  // and joins the held-out rows over ranks, so that every rank holds those of all rows
  // (collective; a no-op with one rank). Between the accumulation and Select.
  void CombineRanks();
  // Picks the lambda with the least leave-one-out error and forms the weights.
  void Select();
  // Predictions for a p x b block: m x b.
  arma::mat Predict(const arma::mat& x) const;
  // Adds the squared errors of `Predict(x)` against y, and of the mean `center` (m) to `e`.
  void AccumulateErrors(const arma::mat& x, const arma::mat& y, const arma::vec& center,
                        Errors& e) const;

  const arma::vec& lambdas() const { return lambdas_; }
  const arma::vec& loo_mse() const { return loo_; }  // per lambda, mean over rows and entries
  // Held-out squared error (sum over rows and entries) at the selected lambda.
  double held_out_sse() const { return heldout_sse_(best_); }
  // The same per held-out row, in the order the rows were accumulated.
  arma::vec held_out_row_sse() const;
  double lambda() const { return lambda_; }
  arma::uword lambda_index() const { return best_; }
  const arma::mat& weights() const { return w_; }    // p x m, on raw features
  const arma::vec& intercept() const { return b_; }  // m
  // The training standard deviation of each feature (1 where constant, or unstandardised): the
  // metric in which the probe's directions are comparable across features.
  const arma::vec& feature_scale() const { return sigma_; }

 private:
  arma::vec lambdas_;
  bool standardize_;
  std::int64_t n_ = 0;
  arma::vec mu_, sigma_;  // feature standardisation
  arma::vec eigval_;      // s
  arma::mat eigvec_;      // V
  arma::vec ybar_;        // training target mean
  arma::mat beta_;        // V^T Z^T (Y - ybar): p x m
  arma::vec loo_sum_;     // per lambda
  std::int64_t loo_rows_ = 0;
  arma::vec loo_;
  arma::vec heldout_sse_;
  std::vector<arma::mat> heldout_rows_;  // per block: lambdas x rows
  double lambda_ = 0;
  arma::uword best_ = 0;
  arma::mat w_;
  arma::vec b_;
};

}  // namespace icl::probes
