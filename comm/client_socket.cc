#include "comm/client_socket.h"

#include "comm/client_codec.h"
#include "comm/curve_keys.h"

namespace tpserve {

StatusOr<std::unique_ptr<ZmqSocket>> ConnectClientSocket(zmq::context_t& context, const ClientSocketOptions& options) {
  SocketOptions socket_options;
  socket_options.max_message_bytes = proto::kMaxClientMessageBytes;
  socket_options.send_hwm = options.send_hwm;
  socket_options.recv_hwm = options.recv_hwm;
  RETURN_IF_ERROR(UseCurveClientKeys(options.keys_dir, "clients", options.key_name, &socket_options));
  return ZmqSocket::Connect(context, zmq::socket_type::dealer, options.endpoint, socket_options);
}

}  // namespace tpserve
