// RequestStream: turns one request's scheduler events into the client's messages. Per sample it
// keeps an incremental detokenizer (model/stream_decoder.h) and a StopStringMatcher, so text is
// sent as soon as it is final; with stream=false everything of a sample goes out in one chunk
// right before its finish.
//
// Prompt logprobs (request.prompt_logprobs): one PromptLogprobs message per request, before its
// first chunk, from the first event that carries them (SequenceEvent::has_prompt_logprobs).
//
// Token ids: every sampled token is reported, including the EOS / stop token that ended a sample
// (as `tpserve-run --print-ids` prints them); the text of such a finishing token is not output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/client_codec.h"
#include "coordinator/scheduler.h"
#include "coordinator/stop_string_matcher.h"
#include "model/stream_decoder.h"
#include "model/tokenizer.h"

namespace tpserve {

class RequestStream {
 public:
  // `seed`: the request's seed (given, or drawn by the server), reported in every Finish.
  // `tokenizer` may be null (no text, ids only); it must outlive the stream.
  RequestStream(uint64_t client_request_id, const proto::GenerateRequest& request, uint64_t seed,
                const Tokenizer* tokenizer);

  struct Output {
    std::vector<proto::ServerMessage> messages;  // to send, in order
    bool is_stop_string_hit = false;             // the caller must end the sequence (Abort kStop)
  };
  // One scheduler event of sample event.sample_index.
  Output OnEvent(const SequenceEvent& event);
  // Ends a sample the scheduler did not end itself (stop string, cancel): flushes what it holds
  // (unless stopped by a stop string) and returns the final chunk (if any) and the finish.
  std::vector<proto::ServerMessage> FinishSample(int32_t sample_index, proto::FinishReason reason,
                                                 const SampleUsage& usage);

  bool is_sample_finished(int32_t sample_index) const { return samples_[sample_index].is_finished; }
  bool all_finished() const { return num_finished_ == static_cast<int32_t>(samples_.size()); }
  int32_t num_samples() const { return static_cast<int32_t>(samples_.size()); }
  uint64_t client_request_id() const { return client_request_id_; }
  // The request is re-run after its worker group was lost; every Finish reports the count.
  void CountReplay() { ++num_replays_; }
  uint32_t num_replays() const { return num_replays_; }

 private:
  struct Sample {
    std::unique_ptr<StreamDecoder> decoder;  // null without a tokenizer
    StopStringMatcher stops;
    proto::TokenChunk pending;  // not yet sent (always empty after a streamed event)
    bool is_finished = false;
  };

  proto::ServerMessage ChunkMessage(Sample& sample);
  proto::ServerMessage PromptLogprobsMessage(const SequenceEvent& event) const;
  proto::ServerMessage FinishMessage(int32_t sample_index, proto::FinishReason reason, const SampleUsage& usage);

  uint64_t client_request_id_;
  uint64_t seed_;
  bool is_stream_;
  bool wants_logprobs_;
  bool wants_prompt_logprobs_;
  bool is_prompt_logprobs_sent_ = false;
  std::vector<Sample> samples_;
  int32_t num_finished_ = 0;
  uint32_t num_replays_ = 0;
};

}  // namespace tpserve
