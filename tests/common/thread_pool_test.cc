// ThreadPool: every ParallelFor covers [0, n) exactly once, with a split that depends only on n and
// the pool size; many back-to-back calls, and calls after the workers went idle, all complete, with
// and without polling.
#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace tpserve {
namespace {

// Chunks one call produced, sorted by begin.
std::vector<std::pair<int64_t, int64_t>> Chunks(ThreadPool& pool, int64_t n, std::vector<int>* hits) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  hits->assign(n, 0);
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) (*hits)[i] += 1;  // disjoint chunks: no two threads share i
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPoolTest, CoversEachIndexExactlyOnce) {
  std::mt19937 rng(42);
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 8, 13, 64, 100, 1000, 4097};
    for (int i = 0; i < 20; ++i) sizes.push_back(1 + rng() % 5000);
    for (int64_t n : sizes) {
      std::vector<int> hits;
      const auto chunks = Chunks(pool, n, &hits);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "threads " << threads << " n " << n << " i " << i;
      // Contiguous, non-empty, at most one per thread, sizes differ by at most one.
      ASSERT_LE(static_cast<int>(chunks.size()), threads);
      ASSERT_EQ(chunks.front().first, 0);
      ASSERT_EQ(chunks.back().second, n);
      for (size_t c = 1; c < chunks.size(); ++c) ASSERT_EQ(chunks[c].first, chunks[c - 1].second);
      int64_t lo = n, hi = 0;
      for (const auto& [b, e] : chunks) {
        ASSERT_LT(b, e);
        lo = std::min(lo, e - b);
        hi = std::max(hi, e - b);
      }
      ASSERT_LE(hi - lo, 1);
    }
  }
}

TEST(ThreadPoolTest, SplitDependsOnlyOnNAndPoolSize) {
  ThreadPool a(3), b(3);
  for (int64_t n : {5, 17, 1000}) {
    std::vector<int> hits_a, hits_b;
    const auto first = Chunks(a, n, &hits_a);
    for (int rep = 0; rep < 50; ++rep) EXPECT_EQ(Chunks(a, n, &hits_a), first);
    EXPECT_EQ(Chunks(b, n, &hits_b), first);
    // The split is the documented one: base n/3 plus one for the first n%3 chunks.
    const int64_t base = n / 3, extra = n % 3;
    EXPECT_EQ(first[0].second, base + (extra > 0 ? 1 : 0));
  }
}

TEST(ThreadPoolTest, ManyBackToBackCallsAndCallsAfterIdle) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  int64_t expected = 0;
  for (int call = 0; call < 3000; ++call) {
    const int64_t n = 1 + call % 37;
    pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
      int64_t s = 0;
      for (int64_t i = begin; i < end; ++i) s += i;
      sum.fetch_add(s);
    });
    expected += n * (n - 1) / 2;
    // Every 1000 calls let the workers go idle, so the next call must wake sleeping threads.
    // (The result is checked either way; the pause only varies the path.)
    if (call % 1000 == 999) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  EXPECT_EQ(sum.load(), expected);
}

// The polling path: workers and caller poll atomics between calls. Many back-to-back calls with a
// counter each (some workers still polling from the last call, some asleep after a pause), and the
// per-call split must be the sleeping pool's.
TEST(ThreadPoolTest, PollingPoolCompletesEveryCallWithTheSameSplit) {
  for (int poll_us : {1, 50, 1000}) {
    ThreadPool polling(3, poll_us), sleeping(3, 0);
    EXPECT_EQ(polling.poll_us(), poll_us);
    std::atomic<int64_t> count{0};
    int64_t expected = 0;
    for (int call = 0; call < 5000; ++call) {
      const int64_t n = 1 + call % 11;
      polling.ParallelFor(n, [&](int64_t begin, int64_t end) { count.fetch_add(end - begin); });
      expected += n;
      ASSERT_EQ(count.load(), expected) << "poll " << poll_us << " call " << call;  // all chunks ran before return
      if (call % 1000 == 999) std::this_thread::sleep_for(std::chrono::microseconds(2 * poll_us));
    }
    for (int64_t n : {2, 3, 17, 1000}) {
      std::vector<int> hits_p, hits_s;
      EXPECT_EQ(Chunks(polling, n, &hits_p), Chunks(sleeping, n, &hits_s)) << "poll " << poll_us << " n " << n;
    }
  }
}

// Workers write plain (non-atomic) memory in a call; the caller and the next call must see it: the
// pool's hand-off orders it (TSan/ASan check the same code).
TEST(ThreadPoolTest, PollingPoolPublishesChunkResults) {
  ThreadPool pool(4, 20);
  std::vector<int64_t> data(4096, 0);
  for (int round = 1; round <= 200; ++round) {
    pool.ParallelFor(static_cast<int64_t>(data.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] += i;
    });
    // Every element read on this thread after the call, including those other threads wrote.
    int64_t sum = 0;
    for (int64_t v : data) sum += v;
    const int64_t n = static_cast<int64_t>(data.size());
    ASSERT_EQ(sum, round * n * (n - 1) / 2);
  }
}

TEST(ThreadPoolTest, DefaultPollFromEnvironment) {
  ASSERT_EQ(setenv("TPSERVE_POLL_US", "37", 1), 0);
  EXPECT_EQ(ThreadPool::DefaultPollMicros(), 37);
  ASSERT_EQ(setenv("TPSERVE_POLL_US", "-5", 1), 0);
  EXPECT_EQ(ThreadPool::DefaultPollMicros(), ThreadPool::kDefaultPollMicros);
  ASSERT_EQ(unsetenv("TPSERVE_POLL_US"), 0);
  EXPECT_EQ(ThreadPool::DefaultPollMicros(), ThreadPool::kDefaultPollMicros);
}

TEST(ThreadPoolTest, ZeroAndNegativeNDoNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.ParallelFor(0, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-3, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace tpserve
