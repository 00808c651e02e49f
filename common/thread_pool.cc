#include "common/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tpserve {

namespace {
void Chunk(int64_t n, int parts, int index, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, extra = n % parts;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

// Tells the core this thread is spinning (frees pipeline resources for a sibling hyperthread).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` for up to poll_us microseconds; the caller sleeps afterwards if it still is not done.
template <typename Done>
void Poll(int poll_us, Done done) {
  if (poll_us <= 0 || done()) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::microseconds(poll_us);
  for (;;) {
    for (int i = 0; i < 32; ++i) {  // ~1 us of pauses between clock reads
      CpuRelax();
      if (done()) return;
    }
    if (Clock::now() >= deadline) return;
    // A thread this one waits for may be queued behind it on this core (more runnable threads than
    // cores): let it run. With a core to spare this returns at once.
    std::this_thread::yield();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads, int poll_us)
    : num_threads_(std::max(1, num_threads)), poll_us_(std::max(0, poll_us)) {
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes fn_, n_ and pending_
  generation_.notify_all();  // a syscall only when some worker sleeps
  int64_t begin, end;
  Chunk(n, num_threads_, 0, &begin, &end);
  if (begin < end) fn(begin, end);
  Poll(poll_us_, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  for (int32_t p; (p = pending_.load(std::memory_order_acquire)) != 0;) pending_.wait(p, std::memory_order_acquire);
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    Poll(poll_us_, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    uint32_t generation;
    while ((generation = generation_.load(std::memory_order_acquire)) == seen) {
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation;
    if (stop_.load(std::memory_order_acquire)) return;
    int64_t begin, end;
    Chunk(n_, num_threads_, index, &begin, &end);
    if (begin < end) (*fn_)(begin, end);
    if (pending_.fetch_sub(1) == 1) pending_.notify_one();  // a syscall only when the caller sleeps
  }
}

int ThreadPool::DefaultThreads() {
  if (const char* env = std::getenv("TPSERVE_THREADS")) {
    const int t = std::atoi(env);
    if (t > 0) return t;
  }
  int local_ranks = 1;
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local_ranks = std::max(1, std::atoi(env));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / local_ranks);
}

int ThreadPool::DefaultPollMicros() {
  if (const char* env = std::getenv("TPSERVE_POLL_US")) {
    const int us = std::atoi(env);
    if (us >= 0) return us;
  }
  return kDefaultPollMicros;
}

}  // namespace tpserve
