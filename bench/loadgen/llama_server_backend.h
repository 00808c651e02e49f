// LlamaServerBackend: the load generator's LoadBackend for llama.cpp's llama-server (the peer in
// bench/serve-sweep.sh), over plain POSIX sockets: one HTTP/1.1 connection per request
// (Connection: close), POST /completion (bench/loadgen/llama_completion.h) streamed back as
// Server-Sent Events, all connections watched by one poll(). Single-threaded, like the runner, so
// events are time-stamped as they are read.
//
// Output tokens: each event adds the growth of llama-server's own tokens_predicted count, and the
// final event's count is reported as the request's total (BackendEvent::reported_output_tokens),
// so tokens are counted as the server generated them, as with tpserve.
// A non-200 reply, an error event, or a stream that ends before its final event is a failed request
// (kError), not a failed run.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "bench/loadgen/http_response_parser.h"
#include "bench/loadgen/load_backend.h"
#include "bench/loadgen/sse_parser.h"

namespace tpserve::loadgen {

class LlamaServerBackend : public LoadBackend {
 public:
  // server: http://HOST:PORT with HOST a dotted IPv4 address or localhost.
  static StatusOr<std::unique_ptr<LlamaServerBackend>> Create(const std::string& server);
  ~LlamaServerBackend() override;

  // GET /health (200 when the model is loaded) and GET /v1/models (id, meta.n_vocab, meta.n_ctx: the
  // context of one slot).
  StatusOr<ServerInfo> Info() override;
  StatusOr<uint64_t> Start(const BenchRequest& request) override;
  void Cancel(uint64_t request_id) override;  // closes the connection: llama-server stops the task
  StatusOr<BackendEvent> Receive(std::chrono::milliseconds timeout) override;
  StatusOr<KvSample> SampleKv() override { return Unimplemented("llama-server does not report KV blocks"); }

 private:
  struct Stream {
    int fd = -1;
    HttpResponseParser http;
    SseParser sse;
    std::string error_body;    // the body of a non-200 reply
    int64_t num_tokens = 0;    // counted so far (the server's tokens_predicted)
  };

  LlamaServerBackend(uint32_t address, uint16_t port) : address_(address), port_(port) {}
  // Opens a connection and writes the whole request. UNAVAILABLE when the server cannot be reached.
  StatusOr<int> Send(const std::string& method, const std::string& path, const std::string& body);
  // A GET answered with 200 and a complete body, read to the end (blocking).
  StatusOr<std::string> Get(const std::string& path);
  // Reads what is available on a request's connection and queues its events; true when it ended.
  bool ReadStream(uint64_t id, Stream* stream);
  // Queues an event from one SSE event of a 200 stream; true when the request ended.
  bool OnSseEvent(uint64_t id, Stream* stream, const SseEvent& event);
  void End(uint64_t id, BackendEvent event);  // queues a request's last event (the caller closes it)

  uint32_t address_;  // IPv4, host order
  uint16_t port_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Stream>> streams_;  // requests in flight
  std::deque<BackendEvent> ready_;                        // events read, not yet returned
};

}  // namespace tpserve::loadgen
