// LoadBackend: the server under load as the runner sees it — start a streamed generation of a
// BenchRequest, receive what came back for any request in flight, cancel one. The runner, dataset,
// arrivals, metrics and report are the same for every backend; only this differs:
//  - TpserveBackend: tpserve's client protocol (tcp://, ZeroMQ + Cap'n Proto).
//  - OpenAiHttpBackend: the OpenAI API's POST /v1/completions streamed as Server-Sent Events
//    (http://): tpserve's HTTP gateway or llama.cpp's llama-server.
// Both report the server's own output-token total at the end (tpserve: the finish's usage; OpenAI:
// the usage chunk); on the way tpserve counts the ids in each chunk, OpenAI 1 per chunk with text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/loadgen/dataset.h"
#include "bench/loadgen/metrics.h"
#include "common/status.h"

namespace tpserve::loadgen {

struct BackendEvent {
  enum class Kind { kTokens, kFinish, kError };
  Kind kind = Kind::kTokens;
  uint64_t request_id = 0;
  int32_t num_tokens = 0;               // kTokens: output tokens this message adds (> 0)
  int32_t reported_output_tokens = -1;  // kFinish: the server's total for the request (< 0: not reported)
  int32_t cached_prompt_tokens = 0;     // kFinish: prompt tokens the server took from its prefix cache
  std::string error;                    // kError: why the request failed
};

struct ServerInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // longest prompt + output one request may have
};

class LoadBackend {
 public:
  virtual ~LoadBackend() = default;

  // The server's model, vocabulary and context; UNAVAILABLE when it is not ready to serve.
  virtual StatusOr<ServerInfo> Info() = 0;
  // Sends the request (prompt ids, output_len tokens with ignore_eos, greedy, streamed); returns
  // its id, unique for this backend. An error here is of the connection, not of the request.
  virtual StatusOr<uint64_t> Start(const BenchRequest& request) = 0;
  // Stops a request in flight; no event of it follows.
  virtual void Cancel(uint64_t request_id) = 0;
  // The next event of any request in flight, waiting up to `timeout`. DEADLINE_EXCEEDED when none
  // came; any other error ends the run.
  virtual StatusOr<BackendEvent> Receive(std::chrono::milliseconds timeout) = 0;
  // The server's KV cache now. UNIMPLEMENTED when the backend cannot tell (llama-server); other
  // errors only lose the sample.
  virtual StatusOr<KvSample> SampleKv() = 0;
};

}  // namespace tpserve::loadgen
