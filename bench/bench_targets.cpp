// Benchmark: regression targets for every prefix k = 1..n, incremental (rank-one updates,
// Sherman-Morrison) against n independent solves per prompt. Prints prompts/s and the ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "data/targets.hpp"

using namespace icl::data;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The direct path: for each k, form X_k^T X_k and solve from scratch.
void DirectTargets(const PromptSet& s, double lambda, TargetSet& t) {
  const int d = s.task.d, n = s.task.n;
  t.w_ols.set_size(d, n, s.size());
  t.w_ridge.set_size(d, n, s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    for (int k = 1; k <= n; ++k) {
      const arma::mat xk = s.x.slice(i).cols(0, k - 1);
      const arma::vec yk = s.y.col(i).head(k);
      const arma::mat xtx = xk * xk.t();
      const arma::vec xty = xk * yk;
      t.w_ols.slice(i).col(k - 1) = arma::pinv(xk.t()) * yk;
      t.w_ridge.slice(i).col(k - 1) = arma::solve(xtx + lambda * arma::eye(d, d), xty);
    }
  }
}

}  // namespace

int main() {
  std::printf("%-14s %10s %14s %14s %8s\n", "config", "prompts", "incr prompts/s",
              "direct prompts/s", "ratio");
  for (auto [d, n] : std::vector<std::pair<int, int>>{{4, 12}, {8, 40}, {20, 40}}) {
    TaskConfig task;
    task.d = d;
    task.n = n;
    const std::size_t count = 2000;
    const PromptSet s = SamplePrompts(task, 1, 0, count);
    std::vector<double> incr, direct;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      TargetSet a = ComputeTargets(s, 0.1);
      incr.push_back(count / Seconds(t0));
      t0 = std::chrono::steady_clock::now();
      TargetSet b;
      DirectTargets(s, 0.1, b);
      direct.push_back(count / Seconds(t0));
    }
    std::sort(incr.begin(), incr.end());
    std::sort(direct.begin(), direct.end());
    std::printf("d=%-2d n=%-7d %10zu %14.0f %14.0f %7.1fx\n", d, n, count, incr[2], direct[2],
                incr[2] / direct[2]);
  }
  std::printf("medians of 5 runs; ratio = incremental / direct throughput\n");
  return 0;
}
