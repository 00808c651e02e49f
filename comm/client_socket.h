// The client side of the coordinator's client endpoint: a DEALER with the client protocol's message
// limit, CURVE when a key directory is given. Used by the C++ client library and the HTTP gateway.
#pragma once

#include <memory>
#include <string>

#include "comm/zmq_transport.h"
#include "common/status.h"

namespace tpserve {

struct ClientSocketOptions {
  std::string endpoint;  // tcp://HOST:PORT of the coordinator's client port
  std::string keys_dir;  // CURVE key directory (comm/curve_keys.h); "": plain TCP
  std::string key_name;  // which DIR/clients/NAME.key ("": the only one, or default)
  int send_hwm = 10000;  // messages queued each way before ZeroMQ blocks or drops
  int recv_hwm = 100000;
};

StatusOr<std::unique_ptr<ZmqSocket>> ConnectClientSocket(zmq::context_t& context, const ClientSocketOptions& options);

}  // namespace tpserve
