// Benchmark: seconds per step of the trainer that `iclprobe train` runs (learners::Train: the
// batch's shards computed in parallel, one intra-op thread each), on 1 and on 2 workers, for the
// shipped configuration and a larger one. Step times come from the trainer's own step callback,
// so start-up, evaluation and saving are not counted; medians over rounds that alternate the
// worker counts, so that machine noise falls on both alike.
//
// Usage: bench_shards [steps=20] [rounds=3] [keep|default]
//   keep     the allocator settings of the iclprobe program (data::KeepFreedMemory), the default
//   default  glibc's own settings, to measure what KeepFreedMemory is worth
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/process.hpp"
#include "learners/trainer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;
using Clock = std::chrono::steady_clock;

namespace {

// A model of these sizes, the rest of the configuration at its defaults.
learners::ModelConfig Sized(int d, int n_max, int layers, int hidden, int heads) {
  learners::ModelConfig c;
  c.d = d, c.n_max = n_max, c.layers = layers, c.hidden = hidden, c.heads = heads;
  return c;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Per-step wall seconds of `steps` timed steps after 3 warm-up steps.
std::vector<double> StepTimes(const learners::ModelConfig& mc, int workers, int steps,
                              const std::string& out) {
  learners::TrainRequest req;
  req.model = mc;
  req.train.task.d = mc.d;
  req.train.task.n = mc.n_max;
  req.train.steps = steps + 3;
  req.train.eval_every = 1 << 30;
  req.train.save_every = 1 << 30;
  req.train.eval_prompts = 8;
  req.out = out;
  req.lock = false;
  std::vector<double> times;
  auto last = Clock::now();
  learners::TrainCallbacks cb;
  cb.on_step = [&](std::int64_t step, std::int64_t, double) {
    const auto now = Clock::now();
    if (step > 3) times.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
  };
  core::ThreadPool pool(workers);
  learners::Train(req, pool, cb);
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string memory = argc > 3 ? argv[3] : "keep";
  if (steps < 1 || rounds < 1 || (memory != "keep" && memory != "default")) {
    std::fprintf(stderr, "usage: bench_shards [steps >= 1] [rounds >= 1] [keep|default]\n");
    return 2;
  }
  // The OpenBLAS kernels iclprobe runs (data/process.hpp); may re-execute this program.
  core::SetUpProcess(argv, /*passive_openmp=*/false, /*keep_freed_memory=*/memory == "keep");
  torch::set_num_threads(1);  // what `iclprobe train` sets: one intra-op thread per worker
  openblas_set_num_threads(1);
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("bench_shards_" + std::to_string(::getpid()) + ".h5"))
                              .string();
  struct Case {
    const char* name;
    learners::ModelConfig c;
  };
  std::vector<Case> cases = {{"shipped d=4 n=12 L=8 H=64 M=4", Sized(4, 12, 8, 64, 4)},
                             {"larger d=8 n=40 L=8 H=128 M=4", Sized(8, 40, 8, 128, 4)}};
  std::printf(
      "trainer of iclprobe train, batch 64 in 2 shards, allocator: %s, OpenBLAS core %s; "
      "medians of %d steps x %d rounds\n",
      memory.c_str(), core::BlasCoreName().c_str(), steps, rounds);
  std::printf("%-32s %12s %12s %9s\n", "config", "1 worker s", "2 workers s", "speed-up");
  for (const auto& k : cases) {
    std::vector<double> one, two;
    for (int r = 0; r < rounds; ++r) {
      for (double t : StepTimes(k.c, 1, steps, out))
        one.push_back(t);
      for (double t : StepTimes(k.c, 2, steps, out))
        two.push_back(t);
    }
    const double a = Median(one), b = Median(two);
    std::printf("%-32s %12.4f %12.4f %8.2fx\n", k.name, a, b, a / b);
    std::fflush(stdout);
  }
  std::filesystem::remove(out);
  return 0;
}
