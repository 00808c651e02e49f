// A fixed pool of worker threads for data-parallel kernels within one rank.
// ParallelFor splits [0, n) into contiguous chunks, one per thread, and blocks until all finish.
// The split depends only on n and the pool size, never on timing, so results are reproducible.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tpserve {

class ThreadPool {
 public:
  // num_threads >= 1; the calling thread is one of them (num_threads - 1 are spawned).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n). Not reentrant.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

  // Default thread count for one rank: the host's cores divided by the ranks on this host
  // (OMPI_COMM_WORLD_LOCAL_SIZE), at least 1; TPSERVE_THREADS overrides.
  static int DefaultThreads();

 private:
  void WorkerLoop(int index);

  const int num_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;  // GUARDED_BY(mu_)
  int64_t n_ = 0;                                              // GUARDED_BY(mu_)
  uint64_t generation_ = 0;                                    // GUARDED_BY(mu_)
  int pending_ = 0;                                            // GUARDED_BY(mu_)
  bool stop_ = false;                                          // GUARDED_BY(mu_)
};

}  // namespace tpserve
