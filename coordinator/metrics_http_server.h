// MetricsHttpServer: GET /metrics over HTTP on the coordinator's own --metrics-port, for
// deployments without the gateway (which serves the same text from the `metrics` request).
// Boost.Beast, synchronous, on its own thread, one connection at a time and one request per
// connection (Connection: close): a Prometheus scraper needs no more, and a slow or silent peer
// is cut off after 5 s, so the next scrape is never held up for long.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace tpserve {

class MetricsHttpServer {
 public:
  // Binds host:port (port 0: a free one) and starts serving; `render` (called on the server's
  // thread) returns the exposition text. UNAVAILABLE when the address cannot be bound.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                            std::function<std::string()> render);
  // Stops accepting and joins the thread (bounded: 5 s of a peer's silence plus one render).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct Impl;
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tpserve
