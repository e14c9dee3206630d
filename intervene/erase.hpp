// Concept erasure (iclprobe erase): least-squares (LEACE) erasure of a regression target from a
// layer's states, the model run on from the erased states, and what it loses per k, against
// erasing a random subspace of the same rank (Belrose et al. 2023's closed form). This file owns
// the erasure file: its writer and reader, through its schema (formats::ErasureSchema()).
#pragma once

#include <armadillo>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "formats/schemas.hpp"
#include "learners/transformer.hpp"

namespace icl::intervene {

inline constexpr const char* kErasureFormat = formats::kErasureFormat;

// The eraser of target z from states h (columns): with Sigma_hh = V L V' (its support, where
// eigenvalues exceed 1e-10 of the largest), W = V L^(-1/2) V' the whitening and U an orthonormal
// basis of the column space of W Sigma_hz,
//   r(h) = h - W^+ U U' W (h - mean h),
// the least-squares (LEACE) eraser: afterwards no affine function of r(h) predicts z better than
// its mean, and r moves h as little as possible in the whitened norm. The random control uses a
// random orthonormal basis of the same rank in the whitened support instead of U: it removes as
// many whitened dimensions, chosen without regard to z.
struct Eraser {
  arma::mat map;   // H x H: W^+ U U' W
  arma::vec mean;  // H
  int rank = 0;    // columns of U
  // h (H x N) -> r(h)
  arma::mat Apply(const arma::mat& h) const;
};
// What an eraser is fitted from: counts and sums of h, z, h h' and h z', added batch by batch.
struct EraserMoments {
  double n = 0;
  arma::vec sum_h, sum_z;
  arma::mat sum_hh, sum_hz;
  void Add(const arma::mat& h, const arma::mat& z);  // h: H x B, z: m x B
};
// Fits the eraser of z (m x N) from h (H x N); `random_seed` != 0: the random control of the same
// rank instead. Throws std::runtime_error when h has no spread.
Eraser FitEraser(const EraserMoments& moments, std::uint64_t random_seed = 0);
Eraser FitEraser(const arma::mat& h, const arma::mat& z, std::uint64_t random_seed = 0);

struct EraseRequest {
  std::string target = "xty";  // xty, w_ols or w_ridge (the Bayes ridge of the task)
  std::vector<int> layers;     // states 0..L-1 (the model runs on after them); empty: all
  std::vector<int> ks;         // each in 1..n-1; empty: all
  int fit_prompts = 4000;      // the eraser's own prompt stream (seed + 1)
  int prompts = 2000;          // test prompts (stream `seed`)
  std::uint64_t seed = 11;
  int bootstrap = 1000;
  int batch = 500;
  void Validate() const;
};

// The erased positions for k are the y-token of example k and the x-token of example k + 1 (the
// query), whose target is the value after k examples; the eraser of (layer, k) is fitted on
// both positions of the fit prompts. Per (layer, k), over the test prompts (error = squared
// error of the prediction of y_(k+1), divided by d; 95% percentile bootstrap over prompts,
// paired where a difference is given):
struct ErasureResult {
  EraseRequest request;
  data::TaskConfig task;
  std::string checkpoint, checkpoint_sha256;
  std::vector<int> layers, ks;
  arma::mat base_error;  // prompts x K: the model as it is
  arma::mat zero_error;  // prompts x K: the zero predictor (knows nothing): y_(k+1)^2 / d
  arma::cube erased;     // prompts x K x layers: the target erased
  arma::cube random;     // prompts x K x layers: a random subspace of the same rank erased
  arma::imat rank;       // layers x K: the eraser's rank
  // layers x K summaries: mean error [lo, hi] of the erased and random runs, and the paired
  // increase over the model as it is; the model's and the zero predictor's means per k.
  arma::mat erased_mean, erased_lo, erased_hi, random_mean, random_lo, random_hi;
  arma::mat erased_increase, erased_increase_lo, erased_increase_hi, random_increase,
      random_increase_lo, random_increase_hi;
  arma::vec base_mean, base_lo, base_hi, zero_mean, zero_lo, zero_hi;  // K
};

// Checks the request against the model (a layer or k it lacks, an unknown target: core::InputError
// naming the setting), then runs it on prompts of `task` (the checkpoint's task).
ErasureResult RunErase(learners::Transformer model, const std::string& checkpoint_sha256,
                       const data::TaskConfig& task, const EraseRequest& request,
                       const std::function<void(long long done, long long total)>& progress = {});

// The file: root attributes (format, created_by, checkpoint, checkpoint_sha256, target, seed,
// prompts, fit_prompts, bootstrap_replicates, task_config, layers, ks, rules) and
//   /erased_mean(_lo, _hi), /random_mean(_lo, _hi), /erased_increase(_lo, _hi),
//   /random_increase(_lo, _hi), /rank                      [layer, k]
//   /base_mean(_lo, _hi), /zero_mean(_lo, _hi)             [k]
//   /erased_error, /random_error [layer, k, prompt];  /base_error, /zero_error [k, prompt]
void WriteErasureFile(const std::string& path, const ErasureResult& result);
ErasureResult ReadErasureFile(const std::string& path);
// The tidy CSV: target,layer,k,prompts,rank,base,base_lo,base_hi,erased,erased_lo,erased_hi,
// erased_increase,erased_increase_lo,erased_increase_hi,random,random_lo,random_hi,
// random_increase,random_increase_lo,random_increase_hi,zero,zero_lo,zero_hi.
void WriteErasureCsv(std::ostream& os, const ErasureResult& result);
// Per k, the erased and random errors by layer against the model's and the zero predictor's.
void PrintErasureSummary(std::ostream& os, const ErasureResult& result);

}  // namespace icl::intervene
