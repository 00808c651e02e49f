// What every HTTP session of a gateway shares: its options, the coordinator link and its counters.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/http/coordinator_link.h"

namespace tpserve::http {

struct GatewayOptions {
  std::string host = "127.0.0.1";            // bound address (loopback unless told otherwise)
  int port = 8000;                           // 0: an ephemeral port (tests)
  std::string coordinator = "tcp://127.0.0.1:5555";
  std::string coordinator_api_key;           // sent to the coordinator ("" when it has no keys)
  std::string keys_dir;                      // CURVE to the coordinator: DIR/coordinator.pub, DIR/clients/<key_name>.key
  std::string key_name;
  std::vector<std::string> api_keys;         // accepted Bearer keys on /v1 routes (empty: no auth)
  bool insecure = false;                     // a non-loopback host without api_keys is refused unless set
  std::string served_model_name;             // "" : the coordinator's model name
  size_t max_body_bytes = size_t{4} << 20;   // larger bodies get 413
  int num_threads = 2;                       // I/O threads, whatever the number of connections
  std::chrono::milliseconds control_timeout{5000};  // health, tokenize, metrics replies
};

struct GatewayCounters {
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> active_generations{0};
  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> client_disconnects_total{0};
};

struct GatewayContext {
  GatewayOptions options;
  CoordinatorLink* link = nullptr;
  GatewayCounters counters;
};

}  // namespace tpserve::http
