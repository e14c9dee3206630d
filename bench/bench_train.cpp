// Benchmark: training steps/s of transformer learners, and the model FLOP rate achieved as a
// fraction of this machine's float32 matrix-multiply rate measured in the same run; each config
// is trained with iclprobe's flat AdamW (what `train` uses) and with LibTorch's AdamW over each
// parameter tensor, alternating in rounds so that machine noise falls on both alike.
// Usage: bench_train [threads] [steps]   (defaults: all cores, 40 timed steps; 0 steps: the
// matrix-multiply rate only)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/process.hpp"
#include "data/tokens_torch.hpp"
#include "learners/flat_adamw.hpp"
#include "learners/transformer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;

namespace {

// A model of these sizes, the rest of the configuration at its defaults.
learners::ModelConfig Sized(int d, int n_max, int layers, int hidden, int heads) {
  learners::ModelConfig c;
  c.d = d, c.n_max = n_max, c.layers = layers, c.hidden = hidden, c.heads = heads;
  return c;
}

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

// float32 GEMM rate (GFLOP/s) at the shapes of one block's linear layers on `rows` tokens (a
// shard of 32 prompts, or one of extract's groups): rows x H times H x 3H, H x H and H x rH, and
// rows x rH times rH x H, as the forward pass runs them; median of 9 rounds of 10 blocks.
double ShapesRate(std::int64_t rows, std::int64_t H, std::int64_t r) {
  const auto x = torch::randn({rows, H}), xr = torch::randn({rows, r * H});
  const auto w3 = torch::randn({H, 3 * H}), w1 = torch::randn({H, H}),
             wr = torch::randn({H, r * H}), wd = torch::randn({r * H, H});
  const double flop = 10.0 * 2 * double(rows) * double(H) * double(H) * double(4 + 2 * r);
  torch::Tensor c;
  std::vector<double> rates;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    for (int b = 0; b < 10; ++b) {
      c = torch::mm(x, w3);
      c = torch::mm(x, w1);
      c = torch::mm(x, wr);
      c = torch::mm(xr, wd);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0) rates.push_back(flop / s / 1e9);  // the first round warms the caches
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

// Seconds per step (one value per timed step), flat or per-tensor AdamW.
std::vector<double> TimeTraining(const learners::ModelConfig& c, int n, int batch, int steps,
                                 bool flat) {
  torch::manual_seed(0);
  learners::Transformer model(c);
  std::unique_ptr<torch::optim::AdamW> per_tensor;
  std::unique_ptr<learners::FlatAdamW> flat_opt;
  if (flat)
    flat_opt = std::make_unique<learners::FlatAdamW>(
        *model, learners::AdamWSettings{1e-4, 0.9, 0.98, 1e-8, 0.0});
  else
    per_tensor = std::make_unique<torch::optim::AdamW>(
        model->parameters(), torch::optim::AdamWOptions(1e-4).betas({0.9, 0.98}).weight_decay(0));
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
    if (flat)
      flat_opt->ZeroGrad();
    else
      per_tensor->zero_grad();
    auto loss = torch::mse_loss(model->forward(tokens), y);
    loss.backward();
    if (flat) {
      flat_opt->ClipGradNorm(1.0);
      flat_opt->Step(1e-4);
    } else {
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      per_tensor->step();
    }
    if (s >= 5) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  core::SetUpProcess(argv, /*passive_openmp=*/false);  // as iclprobe: OpenBLAS's kernels, memory
  const int threads = argc > 1 ? std::atoi(argv[1]) : int(std::thread::hardware_concurrency());
  const int steps = argc > 2 ? std::atoi(argv[2]) : 40;
  torch::set_num_threads(threads);
  openblas_set_num_threads(threads);
  const double peak = MatmulRate();
  std::printf("threads %d; float32 matmul (1024^3, median of 9): %.1f GFLOP/s (OpenBLAS core %s)\n",
              threads, peak, core::BlasCoreName().c_str());
  std::printf(
      "threads %d; float32 matmul at the shipped model's shapes (768 x 64 x 64..256): "
      "%.1f GFLOP/s\n",
      threads, ShapesRate(768, 64, 4));
  std::printf(
      "threads %d; float32 matmul at the larger model's shapes (2560 x 128 x 128..512): "
      "%.1f GFLOP/s\n",
      threads, ShapesRate(2560, 128, 4));
  if (steps <= 0) return 0;
  std::printf("%-32s %6s %14s %14s %7s %14s %9s\n", "config", "batch", "per-tensor st/s",
              "flat st/s", "ratio", "model GFLOP/s", "of matmul");
  struct Case {
    const char* name;
    learners::ModelConfig c;
    int n;
  };
  std::vector<Case> cases = {
      {"shipped d=4 n=12 L=8 H=64 M=4", Sized(4, 12, 8, 64, 4), 12},
      {"larger d=8 n=40 L=8 H=128 M=4", Sized(8, 40, 8, 128, 4), 40},
  };
  for (const auto& k : cases) {
    // Three rounds of (per-tensor, flat), each of steps / 3 timed steps: medians over all.
    std::vector<double> per, flat;
    for (int round = 0; round < 3; ++round) {
      for (double t : TimeTraining(k.c, k.n, 64, std::max(1, steps / 3), false))
        per.push_back(t);
      for (double t : TimeTraining(k.c, k.n, 64, std::max(1, steps / 3), true))
        flat.push_back(t);
    }
    const double tp = Median(per), tf = Median(flat);
    const double gflops = StepFlops(k.c, 64, k.n) / tf / 1e9;
    std::printf("%-32s %6d %14.2f %14.2f %6.2fx %14.1f %8.1f%%\n", k.name, 64, 1 / tp, 1 / tf,
                tp / tf, gflops, 100 * gflops / peak);
  }
  std::printf(
      "medians of step times (after 5 warm-up steps per run); ratio = flat / per-tensor "
      "speed\n");
  return 0;
}
