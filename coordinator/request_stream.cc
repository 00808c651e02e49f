#include "coordinator/request_stream.h"

#include <algorithm>
#include <cstdint>

namespace tpserve {

RequestStream::RequestStream(uint64_t client_request_id, const proto::GenerateRequest& request, uint64_t seed,
                             const Tokenizer* tokenizer)
    : client_request_id_(client_request_id),
      seed_(seed),
      is_stream_(request.stream),
      wants_logprobs_(request.sampling.num_logprobs > 0),
      wants_prompt_logprobs_(request.prompt_logprobs) {
  const uint32_t n = std::max<uint32_t>(request.n, 1);
  samples_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    Sample sample{tokenizer ? std::make_unique<StreamDecoder>(*tokenizer) : nullptr,
                  StopStringMatcher(request.stop), {}, false};
    sample.pending.sample_index = i;
    samples_.push_back(std::move(sample));
  }
}

proto::ServerMessage RequestStream::ChunkMessage(Sample& sample) {
  proto::ServerMessage m;
  m.request_id = client_request_id_;
  m.kind = proto::ServerMessageKind::kChunk;
  m.chunk = std::move(sample.pending);
  sample.pending = proto::TokenChunk();
  sample.pending.sample_index = m.chunk.sample_index;
  return m;
}

proto::ServerMessage RequestStream::PromptLogprobsMessage(const SequenceEvent& event) const {
  proto::ServerMessage m;
  m.request_id = client_request_id_;
  m.kind = proto::ServerMessageKind::kPromptLogprobs;
  m.prompt_logprobs.token_ids = event.prompt_ids;
  m.prompt_logprobs.logprobs.reserve(event.prompt_logprobs.size());
  for (const PromptTokenLogprob& scored : event.prompt_logprobs) {
    m.prompt_logprobs.logprobs.push_back({scored.logprob, scored.top_logprobs});
  }
  return m;
}

proto::ServerMessage RequestStream::FinishMessage(int32_t sample_index, proto::FinishReason reason,
                                                  const SampleUsage& usage) {
  proto::ServerMessage m;
  m.request_id = client_request_id_;
  m.kind = proto::ServerMessageKind::kFinish;
  m.finish.sample_index = static_cast<uint32_t>(sample_index);
  m.finish.reason = reason;
  m.finish.usage.prompt_tokens = static_cast<uint32_t>(usage.num_prompt_tokens);
  m.finish.usage.completion_tokens = static_cast<uint32_t>(usage.num_output_tokens);
  m.finish.usage.cached_prompt_tokens = static_cast<uint32_t>(usage.num_cached_prompt_tokens);
  m.finish.ttft_ms = usage.ttft_s < 0 ? 0 : usage.ttft_s * 1e3;
  m.finish.tpot_ms = usage.tpot_s < 0 ? 0 : usage.tpot_s * 1e3;
  m.finish.seed = seed_;
  m.finish.num_replays = num_replays_;
  m.finish.num_draft_tokens = static_cast<uint32_t>(std::min<int64_t>(usage.num_draft_tokens, UINT32_MAX));
  m.finish.num_accepted_tokens = static_cast<uint32_t>(std::min<int64_t>(usage.num_accepted_tokens, UINT32_MAX));
  m.finish.beam_score = usage.beam_score;
  m.finish.cumulative_logprob = usage.cumulative_logprob;
  return m;
}

RequestStream::Output RequestStream::OnEvent(const SequenceEvent& event) {
  Output out;
  if (event.sample_index < 0 || event.sample_index >= num_samples()) return out;
  Sample& sample = samples_[event.sample_index];
  if (sample.is_finished) return out;
  if (wants_prompt_logprobs_ && event.has_prompt_logprobs && !is_prompt_logprobs_sent_) {
    out.messages.push_back(PromptLogprobsMessage(event));
    is_prompt_logprobs_sent_ = true;
  }
  if (event.token_id >= 0) {
    sample.pending.token_ids.push_back(event.token_id);
    if (wants_logprobs_) sample.pending.logprobs.push_back({event.logprob, event.top_logprobs});
    // The token that ended the sample by EOS / stop id contributes no text.
    const bool is_end_token = event.is_finished && event.finish_reason == FinishReason::kStop;
    if (sample.decoder && !is_end_token) {
      sample.pending.text += sample.stops.Push(sample.decoder->Push(event.token_id));
      out.is_stop_string_hit = sample.stops.stopped();
    }
  }
  if (event.is_finished || out.is_stop_string_hit) {
    proto::FinishReason reason = proto::FinishReason::kStop;
    if (!out.is_stop_string_hit) {
      reason = event.finish_reason == FinishReason::kLength      ? proto::FinishReason::kLength
               : event.finish_reason == FinishReason::kCancelled ? proto::FinishReason::kCancelled
                                                                 : proto::FinishReason::kStop;
    }
    if (out.is_stop_string_hit && !event.is_finished) return out;  // caller aborts, then FinishSample
    for (auto& m : FinishSample(event.sample_index, reason, event.usage)) out.messages.push_back(std::move(m));
    return out;
  }
  if (is_stream_ && (!sample.pending.token_ids.empty() || !sample.pending.text.empty())) {
    out.messages.push_back(ChunkMessage(sample));
  }
  return out;
}

std::vector<proto::ServerMessage> RequestStream::FinishSample(int32_t sample_index, proto::FinishReason reason,
                                                              const SampleUsage& usage) {
  std::vector<proto::ServerMessage> messages;
  Sample& sample = samples_[sample_index];
  if (sample.is_finished) return messages;
  if (!sample.stops.stopped()) {
    if (sample.decoder) sample.pending.text += sample.stops.Push(sample.decoder->Flush());
    sample.pending.text += sample.stops.Flush();
  }
  if (!sample.pending.token_ids.empty() || !sample.pending.text.empty()) messages.push_back(ChunkMessage(sample));
  messages.push_back(FinishMessage(sample_index, reason, usage));
  sample.is_finished = true;
  ++num_finished_;
  return messages;
}

}  // namespace tpserve
