// Benchmark: extraction throughput (prompts/s, MB/s written) of iclprobe extract on 1 worker and
// on all cores, in one run, next to the disk's own sequential write rate (1 MiB blocks,
// fdatasync at the end, like `dd conv=fdatasync`), for a checkpoint (default: the shipped
// learner) and an untrained L=8, H=128, n=40, d=8 learner (on a tenth of the prompts).
// Medians of `reps` runs; the figures that count are the ratios within one run.
// Usage: bench_extract [prompts=20000] [reps=3] [checkpoint=checkpoints/d4_l8_h64.h5]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "core/process.hpp"
#include "extract/extract.hpp"
#include "learners/checkpoint.hpp"
#include "learners/trainer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace icl;
namespace fs = std::filesystem;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// MB/s of writing `mb` MiB of non-zero bytes in 1 MiB blocks and syncing them to the disk.
double DiskWriteRate(const fs::path& path, int mb) {
  std::vector<char> block(1 << 20);
  for (std::size_t i = 0; i < block.size(); ++i)
    block[i] = static_cast<char>(i * 131 + 7);
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  for (int i = 0; i < mb; ++i)
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) break;
  ::fdatasync(fd);
  ::close(fd);
  const double s = Seconds(t0);
  fs::remove(path);
  return mb / s;
}

}  // namespace

int main(int argc, char** argv) {
  core::SetUpProcess(argv, /*passive_openmp=*/false);  // as iclprobe: OpenBLAS's kernels, memory
  const std::int64_t prompts = argc > 1 ? std::atoll(argv[1]) : 20000;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const std::string shipped = argc > 3 ? argv[3] : "checkpoints/d4_l8_h64.h5";
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  // What `extract --threads T` does: serial kernels, T workers over prompt groups.
  torch::set_num_threads(1);
  openblas_set_num_threads(1);
  const fs::path dir = fs::temp_directory_path() / "iclprobe-bench-extract";
  fs::create_directories(dir);

  // The larger learner, untrained (speed does not depend on the weights).
  learners::ModelConfig big;
  big.d = 8, big.n_max = 40, big.layers = 8, big.hidden = 128, big.heads = 4;
  learners::TrainConfig big_train;
  big_train.task.d = 8;
  big_train.task.n = 40;
  const std::string big_path = (dir / "big_init.h5").string();
  learners::WriteInitCheckpoint(big, big_train, big_path);

  const double disk = DiskWriteRate(dir / "disk.bin", 1024);
  std::printf("disk: sequential write %.0f MB/s (1 GiB, 1 MiB blocks, fdatasync)\n", disk);
  std::printf("%d cores; every layer, all positions; median of %d runs\n", cores, reps);
  std::printf("%-16s %8s %-8s %7s %10s %8s %9s %8s %9s\n", "learner", "prompts", "storage",
              "workers", "prompts/s", "MB/s", "of disk", "seconds", "speed-up");
  for (const std::string& ckpt : {shipped, big_path}) {
    if (!fs::exists(ckpt)) {
      std::printf("%-16s (missing: %s)\n", "", ckpt.c_str());
      continue;
    }
    const std::int64_t N = ckpt == big_path ? std::max<std::int64_t>(prompts / 10, 64) : prompts;
    for (bool compress : {false, true}) {
      double one = 0;
      for (int workers : {1, cores}) {
        if (workers == 1 && cores == 1 && one > 0) continue;
        std::vector<double> secs;
        double mb = 0;
        for (int r = 0; r < reps; ++r) {
          extract::ExtractConfig cfg;
          cfg.checkpoint = ckpt;
          cfg.out = (dir / "acts.h5").string();
          cfg.task = learners::ReadCheckpointInfo(ckpt).train.task;
          cfg.task.fixed_w = false;
          cfg.prompts = N;
          cfg.seed = 7;
          cfg.compress = compress;
          extract::ExtractOptions opt;
          opt.force = true;
          const auto t0 = std::chrono::steady_clock::now();
          core::ThreadPool pool(workers);
          extract::Extract(cfg, opt, pool);
          secs.push_back(Seconds(t0));
          mb = double(fs::file_size(cfg.out)) / (1 << 20);
          fs::remove(cfg.out);
        }
        const double s = Median(secs);
        if (workers == 1) one = s;
        std::printf("%-16s %8lld %-8s %7d %10.0f %8.1f %8.0f%% %8.2f %8.2fx\n",
                    fs::path(ckpt).filename().c_str(), static_cast<long long>(N),
                    compress ? "deflate" : "plain", workers, N / s, mb / s,
                    disk > 0 ? 100.0 * mb / s / disk : 0.0, s, one / s);
      }
    }
  }
  fs::remove_all(dir);
  return 0;
}
