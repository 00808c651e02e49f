#include "client/http/gateway.h"

#include <boost/asio/strand.hpp>

#include "client/http/http_session.h"
#include "common/logging.h"

namespace tpserve::http {

namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

Gateway::Gateway(const GatewayOptions& options) : io_(options.num_threads), acceptor_(io_) {
  context_.options = options;
}

Gateway::~Gateway() {
  Stop();
  link_.reset();
}

StatusOr<std::unique_ptr<Gateway>> Gateway::Create(const GatewayOptions& options) {
  if (options.num_threads < 1) return InvalidArgument("the gateway needs at least one I/O thread");
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("--host " + options.host + " is not an IP address");
  if (!address.is_loopback() && options.api_keys.empty()) {
    if (!options.insecure) {
      return FailedPrecondition("refusing to serve " + options.host + " without an API key: anyone who can reach it "
                                "could use the model. Pass --api-key KEY (or set $TPSERVE_API_KEY), or pass --insecure "
                                "to accept the risk");
    }
    LOG(WARN) << "tpserve-http: --insecure: " << options.host << " serves /v1 to anyone who can reach it";
  }
  std::unique_ptr<Gateway> gateway(new Gateway(options));
  CoordinatorLinkOptions link_options;
  link_options.endpoint = options.coordinator;
  link_options.api_key = options.coordinator_api_key;
  link_options.keys_dir = options.keys_dir;
  link_options.key_name = options.key_name;
  ASSIGN_OR_RETURN(gateway->link_, CoordinatorLink::Start(link_options));
  gateway->context_.link = gateway->link_.get();

  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  auto& acceptor = gateway->acceptor_;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " + ec.message());
  gateway->port_ = acceptor.local_endpoint().port();
  gateway->Accept();
  return gateway;
}

void Gateway::Accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;  // Stop()
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);  // SSE events are small: send each at once
      std::make_shared<HttpSession>(std::move(socket), context_)->Start();
    } else {
      LOG(WARN) << "tpserve-http: accept failed: " << ec.message();  // e.g. EMFILE: keep serving
    }
    Accept();
  });
}

void Gateway::Run() {
  std::vector<std::thread> threads;
  for (int i = 1; i < context_.options.num_threads; ++i) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (std::thread& t : threads) t.join();
}

void Gateway::Stop() {
  net::post(io_, [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
  io_.stop();
}

}  // namespace tpserve::http
