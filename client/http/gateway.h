// Gateway: tpserve's OpenAI-compatible HTTP front door. A client of the coordinator's protocol
// (it holds no model and no request state, so several can run behind one load balancer).
//
// Threads: `num_threads` Asio I/O threads run every connection (event-driven: a connection is a
// few objects on a strand, not a thread), plus the coordinator link's one ZeroMQ thread. So the
// count is fixed whatever the number of connections.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "client/http/gateway_context.h"
#include "common/status.h"

namespace tpserve::http {

class Gateway {
 public:
  // Connects the link and binds host:port (INVALID_ARGUMENT / UNAVAILABLE when it cannot).
  static StatusOr<std::unique_ptr<Gateway>> Create(const GatewayOptions& options);
  ~Gateway();

  int port() const { return port_; }  // the bound port (resolves port 0)
  // Serves on num_threads threads until Stop(); returns when they have all returned.
  void Run();
  void Stop();  // thread-safe

 private:
  explicit Gateway(const GatewayOptions& options);
  void Accept();

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::unique_ptr<CoordinatorLink> link_;
  GatewayContext context_;
  int port_ = 0;
};

}  // namespace tpserve::http
