// Benchmark: dmmse (the posterior mean over a finite pool of weight vectors) over PROMPTS prompts
// of a pool of M members, d = 8, n = 40, every k: the learner (which takes the products w_m' x_j
// and the exponentials only for members within reach of the posterior's 2^-53, see
// DmmseLearner::Run) against a plain loop over the members (every product and exponential, member
// by member), with the bound of the whole pool's products, (M x d)(d x n) and back, at this
// machine's GEMM rate beside them: what any method that touches every member at every k costs.
// Medians of REPS runs.
// Usage: bench_dmmse [PROMPTS=2000] [LOG2_M=16] [REPS=3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/process.hpp"
#include "data/task.hpp"
#include "data/task_family.hpp"
#include "learners/classical.hpp"
#include "learners/task_family_learners.hpp"

using namespace icl;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The plain loop: per k, each member's residual sum, its weight exp(-(R_m - min R) / 2 sigma^2)
// and the weighted sum of members, one member at a time. Returns the predictions (n).
arma::vec PlainDmmse(const arma::mat& pool, double sigma, const arma::mat& x, const arma::vec& y) {
  const arma::uword d = pool.n_rows, M = pool.n_cols, n = x.n_cols;
  std::vector<double> R(M, 0.0), p(M);
  arma::vec pred(n);
  for (arma::uword k = 0; k < n; ++k) {
    if (k > 0)
      for (arma::uword m = 0; m < M; ++m) {
        double f = 0;
        for (arma::uword i = 0; i < d; ++i)
          f += pool(i, m) * x(i, k - 1);
        R[m] += (y(k - 1) - f) * (y(k - 1) - f);
      }
    const double least = *std::min_element(R.begin(), R.end());
    double z = 0;
    for (arma::uword m = 0; m < M; ++m)
      z += (p[m] = std::exp(-(R[m] - least) / (2 * sigma * sigma)));
    double out = 0;
    for (arma::uword m = 0; m < M; ++m) {
      double f = 0;
      for (arma::uword i = 0; i < d; ++i)
        f += pool(i, m) * x(i, k);
      out += p[m] / z * f;
    }
    pred(k) = out;
  }
  return pred;
}

// This machine's float64 GEMM rate (GFLOP/s) on 1024^3 products, the median of 3.
double GemmRate() {
  const arma::mat a(1024, 1024, arma::fill::randu), b(1024, 1024, arma::fill::randu);
  std::vector<double> r;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const arma::mat c = a * b;
    r.push_back(2.0 * 1024 * 1024 * 1024 / Seconds(t0) / 1e9 + 0 * c(0, 0));
  }
  return Median(r);
}

}  // namespace

int main(int argc, char** argv) {
  // iclprobe's own process set-up (OpenBLAS's kernels for this CPU, freed memory kept), so that
  // the figures are the program's.
  core::SetUpProcess(argv, /*passive_openmp=*/true);
  const int prompts = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int log2m = argc > 2 ? std::atoi(argv[2]) : 16;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  if (prompts < 1 || log2m < 0 || log2m > 20 || reps < 1) {
    std::fprintf(stderr, "usage: bench_dmmse [PROMPTS>=1] [LOG2_M in 0..20] [REPS>=1]\n");
    return 2;
  }
  data::TaskConfig task;
  task.d = 8;
  task.n = 40;
  task.noise = 0.5;
  task.family = data::ParseTaskFamily("pool:" + std::to_string(1 << log2m));
  const data::PromptSet set = data::SamplePrompts(task, 1, 0, prompts);
  const auto learner = learners::MakeLearner("dmmse", task);
  const auto& dmmse = dynamic_cast<const learners::DmmseLearner&>(*learner);
  const arma::mat& pool = dmmse.pool();
  const double M = pool.n_cols, d = task.d, n = task.n;

  std::vector<double> fast, plain;
  double worst = 0;
  learners::LearnerRun run;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < set.size(); ++i)
      learners::RunOnPrompt(dmmse, set, i, run);
    fast.push_back(Seconds(t0));
    // The plain loop on the first tenth of the prompts (it is slow), scaled to all of them.
    const std::size_t some = std::max<std::size_t>(1, set.size() / 10);
    std::vector<arma::vec> p(some);
    t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < some; ++i)
      p[i] = PlainDmmse(pool, task.noise, set.x.slice(i), set.y.col(i));
    plain.push_back(Seconds(t0) * double(set.size()) / double(some));
    for (std::size_t i = 0; i < some; ++i) {
      learners::RunOnPrompt(dmmse, set, i, run);
      worst = std::max(worst, arma::abs(p[i] - run.predictions).max());
    }
  }
  // The whole pool's products: P = pool' x (M d n multiply-adds) and pool * post (the same), per
  // prompt; the plain loop does them one at a time, the learner only for the members in reach.
  const double flop = 2.0 * 2.0 * M * d * n * prompts;
  const double rate = GemmRate();
  std::printf("dmmse, %d prompts, M = %.0f, d = %.0f, n = %.0f (every k), %d reps, medians\n",
              prompts, M, d, n, reps);
  std::printf("  learner      %8.3f s\n", Median(fast));
  std::printf("  plain loop   %8.3f s (extrapolated from a tenth of the prompts)\n", Median(plain));
  std::printf("  ratio        %8.1fx\n", Median(plain) / Median(fast));
  std::printf(
      "  bound of the whole pool's products at this machine's float64 GEMM rate (%.1f GFLOP/s, "
      "1024^3): "
      "%.3f s (%.1f GFLOP)\n",
      rate, flop / (rate * 1e9), flop / 1e9);
  std::printf("  exponentials of the plain loop: %.3g (M n per prompt)\n", M * n * prompts);
  std::printf("  largest |learner - plain loop| over the checked predictions: %.3g\n", worst);
  return 0;
}
