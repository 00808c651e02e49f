// ZapAuthenticator: the ZeroMQ Authentication Protocol (ZAP, RFC 27) handler of one context. libzmq
// asks it about every CURVE handshake on that context's server sockets; it admits a peer whose public
// key is listed for the socket's ZAP domain ("clients" or "workers") and refuses any other, so a
// stranger can neither submit requests nor register as a worker group. A refused peer's connection is
// closed by libzmq during the handshake: it never reaches the application, and gets no reply.
//
// Start it before binding any CURVE server socket on the context (libzmq admits everyone when no ZAP
// handler is bound). It runs one thread, which stops in the destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace zmq {
class context_t;
}

namespace tpserve {

class ZapAuthenticator {
 public:
  // allowed: ZAP domain -> Z85 public keys admitted on sockets of that domain.
  static StatusOr<std::unique_ptr<ZapAuthenticator>> Start(zmq::context_t& context,
                                                           const std::map<std::string, std::vector<std::string>>& allowed);
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  uint64_t num_admitted() const { return num_admitted_.load(); }
  uint64_t num_refused() const { return num_refused_.load(); }

 private:
  ZapAuthenticator() = default;
  void Serve(void* socket);

  std::map<std::string, std::set<std::string>> allowed_;  // domain -> 32-byte binary keys
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> num_admitted_{0}, num_refused_{0};
  std::thread thread_;
};

}  // namespace tpserve
