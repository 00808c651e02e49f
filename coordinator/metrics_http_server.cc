#include "coordinator/metrics_http_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/logging.h"

namespace tpserve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr int kIoTimeoutSeconds = 5;  // a peer that sends or reads nothing this long is cut off
constexpr size_t kMaxRequestBytes = 16 * 1024;

void SetIoTimeouts(tcp::socket& socket) {
  timeval tv = {};
  tv.tv_sec = kIoTimeoutSeconds;
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

http::response<http::string_body> Answer(const http::request<http::string_body>& request,
                                         const std::function<std::string()>& render) {
  http::response<http::string_body> response;
  response.version(request.version());
  response.keep_alive(false);
  response.set(http::field::server, "tpserve-coordinator");
  const beast::string_view target = request.target();
  const beast::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    response.result(http::status::not_found);
    response.set(http::field::content_type, "text/plain");
    response.body() = "not found: the metrics are at /metrics\n";
  } else if (request.method() != http::verb::get && request.method() != http::verb::head) {
    response.result(http::status::method_not_allowed);
    response.set(http::field::allow, "GET, HEAD");
    response.set(http::field::content_type, "text/plain");
    response.body() = "method not allowed\n";
  } else {
    response.result(http::status::ok);
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    if (request.method() == http::verb::get) response.body() = render();
  }
  response.prepare_payload();
  return response;
}

}  // namespace

struct MetricsHttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;

  // One connection: read one request, answer it, close. Errors (timeouts, garbage) just end it.
  void Handle(tcp::socket socket) {
    SetIoTimeouts(socket);
    beast::error_code ec;
    beast::flat_buffer buffer(kMaxRequestBytes);
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxRequestBytes);
    parser.body_limit(kMaxRequestBytes);
    http::read(socket, buffer, parser, ec);
    if (ec) return;
    http::response<http::string_body> response = Answer(parser.get(), render);
    http::write(socket, response, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;  // closed: stopping
      if (!ec) Handle(std::move(socket));
      Accept();
    });
  }
};

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host, int port,
                                                                      std::function<std::string()> render) {
  if (port < 0 || port > 65535) return InvalidArgument("metrics port " + std::to_string(port) + " is out of range");
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("metrics host " + host + " is not an IP address: " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot serve metrics on " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(std::move(impl)));
  server->port_ = server->impl_->acceptor.local_endpoint().port();
  server->impl_->Accept();
  server->thread_ = std::thread([io = &server->impl_->io] { io->run(); });
  LOG(INFO) << "coordinator: metrics on http://" << host << ":" << server->port_ << "/metrics";
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
  thread_.join();  // run() returns once the accept is cancelled and nothing else is pending
}

}  // namespace tpserve
