#include "coordinator/metrics_exchange.h"

namespace tpserve {

std::string MetricsExchange::Fetch(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = ++num_requested_;
  is_wanted_.store(true, std::memory_order_release);
  published_cv_.wait_for(lock, timeout, [&] { return num_answered_ >= ticket; });
  return text_;
}

void MetricsExchange::Publish(std::string text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(text);
    num_answered_ = num_requested_;
    is_wanted_.store(false, std::memory_order_release);
  }
  published_cv_.notify_all();
}

}  // namespace tpserve
