#include "core/parallel.h"

#include "core/threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace hqekv {
namespace {

// Workers wait for a generation counter to change, run their slice of the
// current job, and report completion. The caller runs slice 0 itself.
// True on pool workers and on a caller while it runs a slice: nested
// ParallelFor calls from such threads run inline instead of deadlocking.
thread_local bool t_inside_pool = false;

class Pool {
 public:
  ~Pool() { Resize(1); }

  void Resize(int n) {
    n = std::max(1, n);
    {
      std::unique_lock<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    threads_ = n;
    // A worker must start from the generation current now, not the one it
    // sees when its thread gets scheduled, or it could miss the first job.
    const uint64_t start = generation_;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, start] { Loop(i, start); });
  }

  int threads() const { return threads_; }

  void Run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    const int parts = static_cast<int>(std::min<int64_t>(threads_, n));
    if (parts <= 1 || t_inside_pool) {
      if (n > 0) fn(0, n);
      return;
    }
    std::lock_guard<std::mutex> serial(run_mu_);
    {
      std::unique_lock<std::mutex> lock(mu_);
      job_ = &fn;
      n_ = n;
      parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    cv_.notify_all();
    t_inside_pool = true;
    Slice(0, n, parts, fn);
    t_inside_pool = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  static void Slice(int i, int64_t n, int parts, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t b = n * i / parts, e = n * (i + 1) / parts;
    if (b < e) fn(b, e);
  }

  void Loop(int index, uint64_t seen) {
    t_inside_pool = true;
    for (;;) {
      const std::function<void(int64_t, int64_t)>* job;
      int64_t n;
      int parts;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        job = job_;
        n = n_;
        parts = parts_;
      }
      if (job && index < parts) {
        Slice(index, n, parts, *job);
        std::unique_lock<std::mutex> lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int threads_ = 1;
};

Pool& GlobalPool() {
  static Pool* pool = [] {
    auto* p = new Pool();  // leaked on purpose: no destruction-order issues at exit
    p->Resize(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    return p;
  }();
  return *pool;
}

}  // namespace

int CpuCount() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
int MaxThreads() { return std::max(16, 4 * CpuCount()); }
void SetNumThreads(int n) { GlobalPool().Resize(std::clamp(n, 1, MaxThreads())); }
int NumThreads() { return GlobalPool().threads(); }
void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  GlobalPool().Run(n, fn);
}

}  // namespace hqekv
