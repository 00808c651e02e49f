#include "comm/zap_authenticator.h"

#include <zmq.h>

#include <zmq.hpp>

#include "common/logging.h"

namespace tpserve {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";  // fixed by RFC 27
constexpr int kPollMs = 100;                                // how often the thread checks for stop

std::string Frame(zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

}  // namespace

StatusOr<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(
    zmq::context_t& context, const std::map<std::string, std::vector<std::string>>& allowed) {
  std::unique_ptr<ZapAuthenticator> auth(new ZapAuthenticator());
  for (const auto& [domain, keys] : allowed) {
    std::set<std::string>& binary = auth->allowed_[domain];
    for (const std::string& z85 : keys) {
      uint8_t raw[32];
      if (z85.size() != 40 || zmq_z85_decode(raw, z85.c_str()) == nullptr) {
        return InvalidArgument("not a Z85 CURVE public key: '" + z85 + "'");
      }
      binary.insert(std::string(reinterpret_cast<const char*>(raw), 32));
    }
  }
  // Bind here, not in the thread, so the handler exists before Start returns.
  auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::rep);
  try {
    socket->set(zmq::sockopt::linger, 0);
    socket->bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("ZAP handler: bind ") + kZapEndpoint + ": " + e.what());
  }
  ZapAuthenticator* self = auth.get();
  self->thread_ = std::thread([self, s = std::move(socket)]() mutable { self->Serve(s.get()); });
  return auth;
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::Serve(void* raw_socket) {
  auto& socket = *static_cast<zmq::socket_t*>(raw_socket);
  while (!stop_.load()) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) == 0) continue;
      // Request: version, request id, domain, address, routing id, mechanism, credentials...
      std::vector<std::string> frames;
      do {
        zmq::message_t m;
        if (!socket.recv(m)) break;
        frames.push_back(Frame(m));
      } while (socket.get(zmq::sockopt::rcvmore));
      const bool well_formed = frames.size() >= 6 && frames[0] == "1.0";
      const std::string request_id = frames.size() > 1 ? frames[1] : "";
      bool admit = false;
      if (well_formed && frames[5] == "CURVE" && frames.size() == 7) {
        auto it = allowed_.find(frames[2]);
        admit = it != allowed_.end() && it->second.count(frames[6]) > 0;
      }
      (admit ? num_admitted_ : num_refused_).fetch_add(1);
      if (!admit) {
        LOG(WARN) << "ZAP: refused a " << (frames.size() > 5 ? frames[5] : "?") << " peer from "
                  << (frames.size() > 3 ? frames[3] : "?") << " on domain '" << (frames.size() > 2 ? frames[2] : "")
                  << "' (key not listed)";
      }
      const std::vector<std::string> reply = {"1.0", request_id, admit ? "200" : "400",
                                              admit ? "OK" : "key not listed", "", ""};
      for (size_t i = 0; i < reply.size(); ++i) {
        socket.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      LOG(WARN) << "ZAP handler: " << e.what();
    }
  }
}

}  // namespace tpserve
