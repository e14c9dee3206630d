// Benchmark: training steps/s of transformer learners, and the model FLOP rate achieved as a
// fraction of this machine's float32 matrix-multiply rate measured in the same run.
// Usage: bench_train [threads] [steps]   (defaults: all cores, 40 timed steps)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "data/tokens_torch.hpp"
#include "learners/transformer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// float32 GEMM rate (GFLOP/s): median of 9 products of 1024 x 1024 matrices.
double MatmulRate() {
  const auto a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  auto c = torch::mm(a, b);
  std::vector<double> rates;
  for (int i = 0; i < 9; ++i) {
    const auto t0 = Clock::now();
    c = torch::mm(a, b);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(2.0 * 1024 * 1024 * 1024 / s / 1e9);
  }
  return Median(rates);
}

// Matrix-multiply FLOPs of one training step (forward + backward = 3x forward).
double StepFlops(const learners::ModelConfig& c, int batch, int n) {
  const double tokens = double(batch) * 2 * n, H = c.hidden, T = 2.0 * n;
  const double per_layer =
      2 * tokens * (3 * H * H + H * H + 2 * H * c.mlp_ratio * H)  // projections, MLP
      + 2 * 2 * batch * T * T * H;                                // scores and mixing
  const double io = 2 * tokens * (c.d + 1) * H + 2 * batch * n * H;
  return 3 * (c.layers * per_layer + io);
}

struct Result {
  double steps_per_s, gflops;
};

Result TimeTraining(const learners::ModelConfig& c, int n, int batch, int steps) {
  torch::manual_seed(0);
  learners::Transformer model(c);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-4).betas({0.9, 0.98}));
  data::TaskConfig task;
  task.d = c.d;
  task.n = n;
  std::vector<double> times;
  for (int s = 0; s < steps + 5; ++s) {
    const auto t0 = Clock::now();
    // The same work as one step of iclprobe train: sample, tokenise, forward, backward, clip, step.
    const auto set = data::SamplePrompts(task, 1, std::int64_t(s) * batch, batch);
    const auto tokens = data::TokenTensor(set, 0, batch);
    const auto y =
        torch::from_blob(const_cast<double*>(set.y.memptr()), {batch, n}, torch::kFloat64)
            .to(torch::kFloat32);
    opt.zero_grad();
    auto loss = torch::mse_loss(model->forward(tokens), y);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    if (s >= 5) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double t = Median(times);
  return {1.0 / t, StepFlops(c, batch, n) / t / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  const int steps = argc > 2 ? std::atoi(argv[2]) : 40;
  torch::set_num_threads(threads);
  openblas_set_num_threads(threads);
  const double peak = MatmulRate();
  std::printf("threads %d; float32 matmul (1024^3, median of 9): %.1f GFLOP/s\n", threads, peak);
  std::printf("%-34s %6s %10s %12s %10s\n", "config", "batch", "steps/s", "model GFLOP/s",
              "of matmul");
  struct Case {
    const char* name;
    learners::ModelConfig c;
    int n;
  };
  std::vector<Case> cases = {
      {"shipped d=4 n=12 L=8 H=64 M=4", {4, 12, 8, 64, 4, 4}, 12},
      {"larger  d=8 n=40 L=8 H=128 M=4", {8, 40, 8, 128, 4, 4}, 40},
  };
  for (const auto& k : cases) {
    const Result r = TimeTraining(k.c, k.n, 64, steps);
    std::printf("%-34s %6d %10.2f %12.1f %9.1f%%\n", k.name, 64, r.steps_per_s, r.gflops,
                100 * r.gflops / peak);
  }
  std::printf("medians over %d timed steps after 5 warm-up steps\n", steps);
  return 0;
}
