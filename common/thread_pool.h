// A fixed pool of worker threads for data-parallel kernels within one rank.
// ParallelFor splits [0, n) into contiguous chunks, one per thread, and blocks until all finish.
// The split depends only on n and the pool size, never on timing, so results are reproducible.
//
// Waiting (llama.cpp's --poll): a decode step makes a few hundred short ParallelFor calls, so the
// hand-off latency matters. Workers waiting for the next call, and the caller waiting for the workers,
// first poll an atomic for up to poll_us microseconds (with a pause instruction), then sleep on a futex.
// poll_us = 0 sleeps at once. A pool between steps polls for at most poll_us, then every thread
// sleeps: an idle process takes no CPU. Polling pays only while each thread has a core to itself; on an
// oversubscribed host it holds a core that another thread needs (bench/README.md, "Thread-pool dispatch").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tpserve {

class ThreadPool {
 public:
  // num_threads >= 1; the calling thread is one of them (num_threads - 1 are spawned). poll_us >= 0.
  explicit ThreadPool(int num_threads, int poll_us = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  int poll_us() const { return poll_us_; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n). Not reentrant; one caller at a time.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

  // Default thread count for one rank: the host's cores divided by the ranks on this host
  // (OMPI_COMM_WORLD_LOCAL_SIZE), at least 1; TPSERVE_THREADS overrides.
  static int DefaultThreads();
  // Default poll budget: kDefaultPollMicros; TPSERVE_POLL_US overrides. 50 us (llama.cpp's default
  // --poll is also 50, in its own units): SmolLM2 decode B=1 at 2 threads ~1.6x (median of paired rounds)
  // over sleeping at once when both cores were free, no loss on the loaded host (bench/README.md).
  static int DefaultPollMicros();
  static constexpr int kDefaultPollMicros = 50;

 private:
  void WorkerLoop(int index);

  const int num_threads_;
  const int poll_us_;
  std::vector<std::thread> threads_;
  // The call being run: written by the caller before it bumps generation_ (release), read by the
  // workers after they see the bump (acquire).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<uint32_t> generation_{0};  // bumped once per call and once at shutdown; workers wait on it
  std::atomic<int32_t> pending_{0};      // workers still running the current call; the caller waits on it
  std::atomic<bool> stop_{false};
};

}  // namespace tpserve
