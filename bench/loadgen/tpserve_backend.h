// TpserveBackend: the load generator's LoadBackend for a tpserve coordinator, through the client
// library (one connection, many requests multiplexed on it).
#pragma once

#include <memory>
#include <string>

#include "bench/loadgen/load_backend.h"
#include "client/client.h"

namespace tpserve::loadgen {

class TpserveBackend : public LoadBackend {
 public:
  // server: tcp://HOST:PORT of the coordinator's client endpoint; keys_dir (CURVE, "": plain TCP) and
  // key_name as in ClientOptions.
  static StatusOr<std::unique_ptr<TpserveBackend>> Connect(const std::string& server, const std::string& keys_dir,
                                                          const std::string& key_name);

  StatusOr<ServerInfo> Info() override;
  StatusOr<uint64_t> Start(const BenchRequest& request) override;
  void Cancel(uint64_t request_id) override;
  StatusOr<BackendEvent> Receive(std::chrono::milliseconds timeout) override;
  StatusOr<KvSample> SampleKv() override;  // the coordinator's Stats (a round trip on the connection)

 private:
  explicit TpserveBackend(std::unique_ptr<Client> client) : client_(std::move(client)) {}

  std::unique_ptr<Client> client_;
};

}  // namespace tpserve::loadgen
