// Benchmark: extraction throughput (prompts/s, MB/s written) of iclprobe extract, plain and
// compressed, for a given checkpoint (default: the shipped learner) and an untrained
// L=8, H=128, n=40, d=8 learner.
// Usage: bench_extract [prompts=20000] [threads=all] [checkpoint=checkpoints/d4_l8_h64.h5]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "extract/extract.hpp"
#include "learners/checkpoint.hpp"
#include "learners/trainer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const std::int64_t prompts = argc > 1 ? std::atoll(argv[1]) : 20000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : int(std::thread::hardware_concurrency());
  const std::string shipped = argc > 3 ? argv[3] : "checkpoints/d4_l8_h64.h5";
  torch::set_num_threads(threads);
  openblas_set_num_threads(threads);
  const fs::path dir = fs::temp_directory_path() / "iclprobe-bench-extract";
  fs::create_directories(dir);

  // The larger learner, untrained (speed does not depend on the weights).
  learners::ModelConfig big{8, 40, 8, 128, 4, 4};
  learners::TrainConfig big_train;
  big_train.task.d = 8;
  big_train.task.n = 40;
  const std::string big_path = (dir / "big_init.h5").string();
  learners::WriteInitCheckpoint(big, big_train, big_path);

  std::printf("threads %d, %lld prompts, every layer, all positions\n", threads,
              static_cast<long long>(prompts));
  std::printf("%-28s %-9s %10s %10s %10s %9s\n", "learner", "storage", "prompts/s", "MB/s",
              "file MB", "seconds");
  for (const std::string& ckpt : {shipped, big_path}) {
    if (!fs::exists(ckpt)) {
      std::printf("%-28s (missing: %s)\n", "", ckpt.c_str());
      continue;
    }
    for (bool compress : {false, true}) {
      extract::ExtractConfig cfg;
      cfg.checkpoint = ckpt;
      cfg.out = (dir / "acts.h5").string();
      cfg.task = learners::ReadCheckpointInfo(ckpt).train.task;
      cfg.task.fixed_w = false;
      cfg.prompts = prompts;
      cfg.seed = 7;
      cfg.compress = compress;
      extract::ExtractOptions opt;
      opt.force = true;
      const auto t0 = std::chrono::steady_clock::now();
      extract::Extract(cfg, opt);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double mb = double(fs::file_size(cfg.out)) / (1 << 20);
      std::printf("%-28s %-9s %10.0f %10.1f %10.1f %9.2f\n", fs::path(ckpt).filename().c_str(),
                  compress ? "deflate" : "plain", prompts / s, mb / s, mb, s);
      fs::remove(cfg.out);
    }
  }
  fs::remove_all(dir);
  return 0;
}
