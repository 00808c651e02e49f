// MetricsExchange: hands the metrics text from the thread that owns the metrics (the Server's
// loop) to a thread that serves scrapes (MetricsHttpServer), so the metrics themselves need no
// locks. A scrape asks for a fresh rendering and waits for the loop to publish one, which the loop
// does at its next iteration (it wakes at least every 20 ms).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace tpserve {

class MetricsExchange {
 public:
  // Any thread: asks for fresh text and waits up to `timeout` for it. On timeout (the loop is gone
  // or stuck) returns the last text published, empty if none ever was.
  std::string Fetch(std::chrono::milliseconds timeout);
  // The owner's thread: whether a Fetch is waiting (cheap: one atomic load).
  bool is_wanted() const { return is_wanted_.load(std::memory_order_acquire); }
  // The owner's thread: answers every Fetch waiting now.
  void Publish(std::string text);

 private:
  std::mutex mu_;
  std::condition_variable published_cv_;
  std::string text_;             // GUARDED_BY(mu_)
  uint64_t num_requested_ = 0;   // GUARDED_BY(mu_): Fetch calls so far
  uint64_t num_answered_ = 0;    // GUARDED_BY(mu_): of those, answered by a Publish
  std::atomic<bool> is_wanted_{false};
};

}  // namespace tpserve
