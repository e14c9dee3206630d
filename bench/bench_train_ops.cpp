// Benchmark: where a training step's time goes, by LibTorch operator. Runs the
// trainer's per-shard work (forward, MSE loss, backward) of the shipped configuration on one
// thread under the legacy autograd profiler and prints each operator's self time (its time
// less that of the operators it called) as a share of the profiled wall time, with the step's
// GEMM work and the rate it reached. Use it to see what a change to the transformer removes.
//
// Then times the attention scores q k^T of one block as torch::matmul does them (bmm: one
// dispatched matrix product per prompt and head) against the same products called on the BLAS
// directly, and says whether the two agree bit for bit.
//
// First, the step times of kernels 1, 2 (the fused GELU) and 3 (GELU and attention fused), then
// the profile of the default arithmetic (kernels 3).
//
// Usage: bench_train_ops [steps=30] [batch=64] [d n layers hidden heads]
//        (default model: the shipped d=4 n=12 L=8 H=64 M=4)
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/process.hpp"
#include "data/task.hpp"
#include "data/tokens_torch.hpp"
#include "learners/gelu.hpp"
#include "learners/transformer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

using namespace icl;
namespace prof = torch::autograd::profiler;

namespace {

// A model of these sizes, the rest of the configuration at its defaults.
learners::ModelConfig Sized(int d, int n_max, int layers, int hidden, int heads) {
  learners::ModelConfig c;
  c.d = d, c.n_max = n_max, c.layers = layers, c.hidden = hidden, c.heads = heads;
  return c;
}

struct OpTime {
  double self_us = 0;
  long calls = 0;
};

// Self time per operator name from push/pop pairs of one thread's events.
void AddSelfTimes(const std::vector<prof::LegacyEvent>& events,
                  std::map<std::string, OpTime>& out) {
  struct Open {
    const prof::LegacyEvent* push;
    double children_us;
  };
  std::vector<Open> stack;
  for (const auto& e : events) {
    if (e.kind() == prof::EventKind::PushRange) {
      stack.push_back({&e, 0});
    } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
      const Open o = stack.back();
      stack.pop_back();
      const double total = o.push->cpuElapsedUs(e);
      OpTime& t = out[o.push->name()];
      t.self_us += total - o.children_us;
      ++t.calls;
      if (!stack.empty()) stack.back().children_us += total;
    }
  }
}

// Wall seconds per call of f, over `calls` calls.
template <class F>
double SecondsPerCall(int calls, F&& f) {
  const auto a = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / calls;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One shard's training work: forward, MSE loss, backward.
void TrainStep(learners::Transformer& m, const torch::Tensor& tokens, const torch::Tensor& y) {
  m->zero_grad();
  torch::mse_loss(m->forward(tokens), y).backward();
}

}  // namespace

int main(int argc, char** argv) {
  core::SetUpProcess(argv, /*passive_openmp=*/false);
  torch::set_num_threads(1);
  openblas_set_num_threads(1);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 64;
  learners::ModelConfig mc = Sized(4, 12, 8, 64, 4);
  if (argc == 8)
    mc = Sized(std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]),
               std::atoi(argv[7]));
  if (steps < 1 || batch < 1 || (argc != 8 && argc > 3)) {
    std::fprintf(stderr, "usage: bench_train_ops [steps] [batch] [d n layers hidden heads]\n");
    return 2;
  }
  // The GELU alone, forward and backward, on one MLP pre-activation of this model; medians of 7
  // rounds of 10 calls, alternating.
  {
    const auto x = torch::randn({long(batch), 2L * mc.n_max, long(mc.mlp_ratio) * mc.hidden});
    const auto g = torch::randn_like(x);
    std::vector<double> rounds[2];
    for (int round = 0; round < 7; ++round)
      for (int kernels = 1; kernels <= 2; ++kernels)
        rounds[kernels - 1].push_back(SecondsPerCall(
            10, [&] { learners::Gelu(x.detach().requires_grad_(true), kernels).backward(g); }));
    const double best[2] = {Median(rounds[0]), Median(rounds[1])};
    std::printf(
        "GELU forward + backward of %ld elements: LibTorch %.2f ms (%.2f ns/element), "
        "fused %.2f ms (%.2f ns/element)\n",
        long(x.numel()), best[0] * 1e3, best[0] * 1e9 / x.numel(), best[1] * 1e3,
        best[1] * 1e9 / x.numel());
  }
  // One batch of prompts and targets for every step below.
  data::TaskConfig task;
  task.d = mc.d;
  task.n = mc.n_max;
  const data::PromptSet set = data::SamplePrompts(task, 1, 0, batch);
  const auto tokens = data::TokenTensor(set, 0, batch);
  const auto y = torch::randn({batch, long(mc.n_max)});
  // Step times of the three arithmetics (ModelConfig::kernels), alternating, medians of 5 rounds.
  {
    std::vector<double> times[3];
    for (int round = 0; round < 5; ++round)
      for (int kernels = 1; kernels <= 3; ++kernels) {
        learners::ModelConfig c = mc;
        c.kernels = kernels;
        torch::manual_seed(1);
        learners::Transformer m(c);
        m->train();
        TrainStep(m, tokens, y);  // warm-up
        times[kernels - 1].push_back(SecondsPerCall(steps, [&] { TrainStep(m, tokens, y); }));
      }
    const double t1 = Median(times[0]), t2 = Median(times[1]), t3 = Median(times[2]);
    std::printf(
        "step, kernels 1 (LibTorch's operators): %.2f ms; kernels 2 (fused GELU): %.2f ms "
        "(%.2fx); kernels 3 (fused GELU and attention): %.2f ms (%.2fx)\n",
        t1 * 1e3, t2 * 1e3, t1 / t2, t3 * 1e3, t1 / t3);
  }
  torch::manual_seed(1);
  learners::Transformer model(mc);
  model->train();
  auto step = [&] { TrainStep(model, tokens, y); };
  for (int i = 0; i < 3; ++i)
    step();  // warm-up: allocator, OpenBLAS buffers

  // Plain wall time first (the profiler adds its own overhead per operator).
  const double plain_s = SecondsPerCall(steps, step);

  std::map<std::string, OpTime> ops;
  double profiled_s = 0;
  {
    prof::TLSLegacyProfilerGuard guard(
        torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU),
        [&](const prof::thread_event_lists& lists) {
          for (const auto& l : lists)
            AddSelfTimes(l, ops);
        });
    profiled_s = SecondsPerCall(steps, step) * steps;
  }
  // GEMM FLOP of one step: per block, QKV (3H^2), out (H^2), MLP (2 r H^2) per token, and
  // attention's two T x T x H products; backward does twice the forward's.
  const double T = 2.0 * mc.n_max, H = mc.hidden, r = mc.mlp_ratio;
  const double fwd = batch * mc.layers * (2 * T * (4 + 2 * r) * H * H + 2 * 2 * T * T * H);
  std::printf("model d=%d n=%d L=%d H=%d M=%d, batch %d, one thread, OpenBLAS core %s\n", mc.d,
              mc.n_max, mc.layers, mc.hidden, mc.heads, batch, core::BlasCoreName().c_str());
  std::printf("step: %.2f ms unprofiled; GEMM work %.2f GFLOP (fwd + bwd) -> %.1f GFLOP/s\n",
              plain_s * 1e3, 3 * fwd / 1e9, 3 * fwd / plain_s / 1e9);
  std::vector<std::pair<std::string, OpTime>> sorted(ops.begin(), ops.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  std::printf("%-44s %10s %8s %10s\n", "operator (self time)", "ms/step", "share", "calls/step");
  double listed = 0;
  for (std::size_t i = 0; i < sorted.size() && i < 25; ++i) {
    const double ms = sorted[i].second.self_us / 1e3 / steps;
    listed += ms;
    std::printf("%-44s %10.3f %7.1f%% %10.1f\n", sorted[i].first.substr(0, 44).c_str(), ms,
                100 * ms / (profiled_s * 1e3 / steps), double(sorted[i].second.calls) / steps);
  }
  std::printf("profiled step: %.2f ms (profiler overhead %.2f ms); top 25 operators %.2f ms\n",
              profiled_s * 1e3 / steps, (profiled_s / steps - plain_s) * 1e3, listed);

  // Attention scores of one block: [B*M, T, hd] x [B*M, hd, T].
  const long BM = long(batch) * mc.heads, Tn = 2L * mc.n_max, hd = mc.hidden / mc.heads;
  const auto q = torch::randn({BM, Tn, hd}), k = torch::randn({BM, Tn, hd});
  torch::Tensor via_torch;
  auto time_it = [&](auto&& f) {  // median of 7 rounds of 20 calls
    std::vector<double> t;
    for (int r = 0; r < 7; ++r)
      t.push_back(SecondsPerCall(20, f));
    return Median(t);
  };
  const double t_torch = time_it([&] { via_torch = torch::matmul(q, k.transpose(1, 2)); });
  auto direct = torch::empty({BM, Tn, Tn});
  const double t_blas = time_it([&] {
    // Row-major S = Q K^T is column-major S^T = K Q^T: K is column-major hd x T, read transposed.
    const int m = int(Tn), n = int(Tn), kk = int(hd), ld = int(hd), ldc = int(Tn);
    const float one = 1, zero = 0;
    for (long b = 0; b < BM; ++b)
      sgemm_("T", "N", &m, &n, &kk, &one, k[b].data_ptr<float>(), &ld, q[b].data_ptr<float>(), &ld,
             &zero, direct[b].data_ptr<float>(), &ldc);
  });
  const double flop = 2.0 * BM * Tn * Tn * hd;
  std::printf(
      "attention scores [%ld, %ld, %ld] x [.., %ld, %ld]: torch::matmul %.3f ms (%.1f GFLOP/s), "
      "BLAS called directly %.3f ms (%.1f GFLOP/s): %.1fx; bit-identical: %s\n",
      BM, Tn, hd, hd, Tn, t_torch * 1e3, flop / t_torch / 1e9, t_blas * 1e3, flop / t_blas / 1e9,
      t_torch / t_blas, torch::equal(via_torch, direct) ? "yes" : "no");
  return 0;
}
