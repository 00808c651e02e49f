// OpenAiHttpBackend ("openai http backend"): the load generator's LoadBackend for any server of the
// OpenAI API — tpserve's HTTP gateway (tpserve serve --http-port, tpserve-http) and llama.cpp's
// llama-server (the peer in bench/serve-sweep.sh) — over plain POSIX sockets: one HTTP/1.1
// connection per request (Connection: close), POST /v1/completions (bench/loadgen/openai_completion.h)
// streamed back as Server-Sent Events, all connections watched by one poll(). Single-threaded, like
// the runner, so events are time-stamped as they are read.
//
// Output tokens: each chunk with text adds 1 (vLLM's benchmark_serving count); the usage chunk's
// completion_tokens is reported as the request's total (BackendEvent::reported_output_tokens), so
// the run's totals are the server's, as with tpserve's ZeroMQ backend. The request ends at
// data: [DONE]. A non-200 reply, an error event, or a stream that ends before [DONE] is a failed
// request (kError), not a failed run.
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

class OpenAiHttpBackend : public LoadBackend {
 public:
  // server: http://HOST:PORT with HOST a dotted IPv4 address or localhost. vocab_size: the model's
  // vocabulary when the server does not report one (tpserve's gateway; 0: none given).
  static StatusOr<std::unique_ptr<OpenAiHttpBackend>> Create(const std::string& server, int32_t vocab_size = 0);
  ~OpenAiHttpBackend() override;

  // GET /health (200 when a model serves) and GET /v1/models: data[0].id is the model, and
  // llama-server's data[0].meta gives n_vocab and n_ctx (the context of one slot). Without meta
  // (tpserve's gateway) the context is POST /tokenize's max_model_len and the vocabulary Create's
  // vocab_size (INVALID_ARGUMENT when that is 0).
  StatusOr<ServerInfo> Info() override;
  // Call after Info(): its model id goes into every request's "model".
  StatusOr<uint64_t> Start(const BenchRequest& request) override;
  void Cancel(uint64_t request_id) override;  // closes the connection: both servers then cancel it
  StatusOr<BackendEvent> Receive(std::chrono::milliseconds timeout) override;
  StatusOr<KvSample> SampleKv() override { return Unimplemented("the OpenAI API does not report KV blocks"); }

 private:
  struct Stream {
    int fd = -1;
    HttpResponseParser http;
    SseParser sse;
    std::string error_body;            // the body of a non-200 reply
    int64_t completion_tokens = -1;    // from the usage chunk (< 0: none yet)
    int64_t cached_prompt_tokens = 0;  // from the usage chunk
  };

  OpenAiHttpBackend(uint32_t address, uint16_t port, int32_t vocab_size)
      : address_(address), port_(port), vocab_size_(vocab_size) {}
  // Opens a connection and writes the whole request. UNAVAILABLE when the server cannot be reached.
  StatusOr<int> Send(const std::string& method, const std::string& path, const std::string& body);
  // A request answered with 200 and a complete body, read to the end (blocking).
  StatusOr<std::string> Fetch(const std::string& method, const std::string& path, const std::string& body = "");
  // Reads what is available on a request's connection and queues its events; true when it ended.
  bool ReadStream(uint64_t id, Stream* stream);
  // Queues an event from one SSE event of a 200 stream; true when the request ended.
  bool OnSseEvent(uint64_t id, Stream* stream, const SseEvent& event);
  void End(uint64_t id, BackendEvent event);  // queues a request's last event (the caller closes it)

  uint32_t address_;  // IPv4, host order
  uint16_t port_;
  int32_t vocab_size_;
  std::string model_;  // data[0].id of GET /v1/models, set by Info()
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Stream>> streams_;  // requests in flight
  std::deque<BackendEvent> ready_;                        // events read, not yet returned
};

}  // namespace tpserve::loadgen
