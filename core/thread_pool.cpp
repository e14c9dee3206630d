// The run's pool of worker threads (core/thread_pool.hpp).
#include "core/thread_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <stdexcept>

#include "core/dist.hpp"

namespace icl::core {

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int WorkerCount(std::int64_t threads, std::int64_t work) {
  if (threads < 0) throw std::logic_error("WorkerCount: a negative thread count");
  const int cores = std::max(1, UsableCores() / dist::RanksOnThisMachine());
  std::int64_t n = threads > 0 ? std::min<std::int64_t>(threads, cores) : cores;
  if (work > 0) n = std::min(n, work);
  return static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw std::logic_error("ThreadPool: needs at least 1 thread");
  for (int t = 1; t < threads; ++t)
    workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_)
    t.join();
}

void ThreadPool::For(std::int64_t count, const std::function<void(std::int64_t)>& f) {
  if (workers_.empty() || count <= 1) {
    std::exception_ptr first;
    for (std::int64_t i = 0; i < count; ++i) {
      try {
        f(i);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    job_ = &f;
    count_ = count;
    next_ = 0;
    busy_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  Run();
  std::unique_lock<std::mutex> lock(m_);
  done_.wait(lock, [this] { return busy_ == 0 && next_ >= count_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::Run() {
  std::unique_lock<std::mutex> lock(m_);
  while (job_ && next_ < count_) {
    const std::int64_t i = next_++;
    ++busy_;
    const auto* job = job_;
    lock.unlock();
    try {
      (*job)(i);
    } catch (...) {
      std::lock_guard<std::mutex> g(m_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    --busy_;
  }
  if (busy_ == 0) done_.notify_all();
}

void ThreadPool::Work() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    Run();
  }
}

}  // namespace icl::core
