// The one pool of worker threads of a run: created by the program (its size from --threads),
// passed down to the stage that fans work out (extract's groups of prompts, the trainer's
// shards, the probes' (k, seed) cells). Libraries never start threads of their own for this.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace icl::core {

// The cores this process may run on (its CPU affinity: taskset, cgroup cpusets), not all the
// machine has.
int UsableCores();
// The workers a request of `threads` gets (0 = all cores; > 0: at most that many): at most the
// cores this process may use (under mpirun, its share of the machine's), and at most `work`
// (independent items, when > 0). Workers beyond the cores only wait for one another (OpenMP's
// and the pools' workers spin before they sleep): 256 of them on two busy cores turned a second
// of work into minutes, and a million never finished starting. The one rule of the CLI's
// --threads and of the Python module's threads=.
int WorkerCount(std::int64_t threads, std::int64_t work = 0);

class ThreadPool {
 public:
  // `threads` workers in all, the calling thread of For() included (1: no thread is started).
  explicit ThreadPool(int threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs f(i) for i in [0, count) on the workers and the calling thread, and returns when all
  // are done, rethrowing the first error (the others still run to the end). Which thread runs
  // which i is not fixed: f must give the same result on any thread. Called from one thread at
  // a time, and never from inside f.
  void For(std::int64_t count, const std::function<void(std::int64_t)>& f);

 private:
  void Run();   // takes indices until none are left
  void Work();  // a worker: waits for a job, runs it

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable wake_, done_;
  const std::function<void(std::int64_t)>* job_ = nullptr;
  std::int64_t count_ = 0, next_ = 0;
  int busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace icl::core
