#include "coordinator/sequence.h"

#include <random>

#include "common/check.h"

namespace tpserve {

const char* SequenceStatusName(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kWaiting: return "waiting";
    case SequenceStatus::kRunning: return "running";
    case SequenceStatus::kFinished: return "finished";
  }
  return "unknown";
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

int32_t Sequence::token_at(int32_t pos) const {
  CHECK_GE(pos, 0);
  CHECK_LT(pos, num_tokens());
  const int32_t num_prompt = num_prompt_tokens();
  return pos < num_prompt ? prompt_ids[pos] : output_ids[pos - num_prompt];
}

std::vector<int32_t> Sequence::AllTokens() const {
  std::vector<int32_t> tokens;
  tokens.reserve(num_tokens());
  tokens.insert(tokens.end(), prompt_ids.begin(), prompt_ids.end());
  tokens.insert(tokens.end(), output_ids.begin(), output_ids.end());
  return tokens;
}

double Sequence::ttft_s() const {
  return first_token_time_s < 0 ? -1.0 : first_token_time_s - arrival_time_s;
}

double Sequence::tpot_s() const {
  if (num_output_tokens() < 2 || first_token_time_s < 0) return -1.0;
  return (last_token_time_s - first_token_time_s) / (num_output_tokens() - 1);
}

uint64_t SampleSeed(uint64_t request_seed, int32_t sample_index) {
  if (sample_index == 0) return request_seed;
  // splitmix64 finaliser over (seed, index): distinct, well-mixed seeds per sample.
  uint64_t z = request_seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(sample_index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t DrawRequestSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | static_cast<uint64_t>(device());
}

}  // namespace tpserve
