#include "comm/plan_codec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <capnp/message.h>

#include "comm/wire_convert.h"

namespace tpserve {
namespace {

Status Invalid(const std::string& where, const std::string& what) {
  return InvalidArgument("step plan: " + where + ": " + what);
}

bool AllNonNegative(const std::vector<int32_t>& values) {
  for (int32_t v : values) {
    if (v < 0) return false;
  }
  return true;
}

Status ValidateSampling(const SamplingParams& s, const std::string& where) {
  if (!std::isfinite(s.temperature) || s.temperature < 0) return Invalid(where, "temperature must be finite and >= 0");
  if (s.top_k < 0) return Invalid(where, "top_k must be >= 0");
  if (!(s.top_p > 0 && s.top_p <= 1)) return Invalid(where, "top_p must be in (0, 1]");
  if (!(s.min_p >= 0 && s.min_p <= 1)) return Invalid(where, "min_p must be in [0, 1]");
  if (!std::isfinite(s.repetition_penalty) || s.repetition_penalty <= 0) {
    return Invalid(where, "repetition_penalty must be finite and > 0");
  }
  if (!std::isfinite(s.presence_penalty) || !std::isfinite(s.frequency_penalty)) {
    return Invalid(where, "presence/frequency penalties must be finite");
  }
  for (const auto& [token, bias] : s.logit_bias) {
    if (token < 0) return Invalid(where, "logit_bias token id < 0");
    if (std::isnan(bias)) return Invalid(where, "logit_bias value is NaN");
  }
  if (s.num_logprobs < 0 || s.num_logprobs > kMaxTopLogprobs) {
    return Invalid(where, "num_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
  }
  return OkStatus();
}

Status ValidateTopLogprobs(const std::vector<TokenLogprob>& top, const std::string& where) {
  if (top.size() > static_cast<size_t>(kMaxTopLogprobs)) return InvalidArgument(where + "too many top logprobs");
  for (const TokenLogprob& t : top) {
    if (t.token_id < 0) return InvalidArgument(where + "top logprob token id < 0");
    if (std::isnan(t.logprob)) return InvalidArgument(where + "top logprob is NaN");
  }
  return OkStatus();
}

}  // namespace

Status ValidateStepPlan(const StepPlan& plan) {
  if (plan.sequences.size() > static_cast<size_t>(kMaxSequencesPerStep)) {
    return Invalid("sequences", std::to_string(plan.sequences.size()) + " exceed the limit");
  }
  std::unordered_set<uint64_t> seq_ids;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequencePlan& seq = plan.sequences[i];
    const std::string where = "sequence " + std::to_string(i) + " (id " + std::to_string(seq.seq_id) + ")";
    if (!seq_ids.insert(seq.seq_id).second) return Invalid(where, "duplicate seq_id");
    if (seq.num_cached < 0) return Invalid(where, "num_cached < 0");
    if (seq.token_ids.empty()) return Invalid(where, "no tokens");
    if (static_cast<int64_t>(seq.num_cached) + static_cast<int64_t>(seq.token_ids.size()) >
        std::numeric_limits<int32_t>::max()) {
      return Invalid(where, "position overflows int32");
    }
    if (!AllNonNegative(seq.token_ids)) return Invalid(where, "negative token id");
    // -1: a sliding layer group's page released past its window (common/kv_groups.h); the executor
    // checks that no query reads it.
    if (std::any_of(seq.block_table.begin(), seq.block_table.end(), [](int32_t b) { return b < -1; })) {
      return Invalid(where, "block id below -1");
    }
    if (!AllNonNegative(seq.penalty_tokens)) return Invalid(where, "negative penalty token id");
    RETURN_IF_ERROR(ValidateSampling(seq.sampling, where));
    if (seq.next_prompt_token < -1) return Invalid(where, "next_prompt_token < -1");
    if (seq.num_draft_tokens < 0 || seq.num_draft_tokens >= static_cast<int64_t>(seq.token_ids.size())) {
      return Invalid(where, "num_draft_tokens outside [0, tokens)");
    }
    if (seq.num_draft_tokens > 0 && (!seq.needs_token || seq.prompt_logprobs)) {
      return Invalid(where, "draft tokens without needs_token, or with prompt_logprobs");
    }
    if (!AllNonNegative(seq.draft_catch_up)) return Invalid(where, "negative draft catch-up token id");
    if (static_cast<int64_t>(seq.draft_catch_up.size()) > seq.num_cached) {
      return Invalid(where, "draft catch-up reaches before position 0");
    }
    if (seq.num_proposals < 0 || seq.num_proposals > kMaxProposalsPerSequence) {
      return Invalid(where, "num_proposals outside [0, " + std::to_string(kMaxProposalsPerSequence) + "]");
    }
    if (!seq.draft_model && (seq.num_proposals > 0 || !seq.draft_catch_up.empty())) {
      return Invalid(where, "draft catch-up or proposals without draft_model");
    }
    if (seq.num_proposals > 0 && (!seq.needs_token || seq.prompt_logprobs || seq.num_draft_tokens > 0)) {
      return Invalid(where, "proposals without needs_token, or with prompt_logprobs or draft tokens");
    }
  }
  for (const auto& [src, dst] : plan.block_copies) {
    if (src < 0 || dst < 0) return Invalid("block_copies", "negative block id");
  }
  return OkStatus();
}

Status ValidateStepResult(const StepResult& result) {
  if (result.sequences.size() > static_cast<size_t>(kMaxSequencesPerStep) ||
      result.prompt_logprobs.size() > static_cast<size_t>(kMaxSequencesPerStep)) {
    return InvalidArgument("step result: too many sequences");
  }
  for (size_t i = 0; i < result.prompt_logprobs.size(); ++i) {
    const std::string where = "step result: prompt logprobs " + std::to_string(i) + ": ";
    for (const PromptTokenLogprob& scored : result.prompt_logprobs[i].positions) {
      if (scored.token_id < 0) return InvalidArgument(where + "token id < 0");
      if (std::isnan(scored.logprob)) return InvalidArgument(where + "logprob is NaN");
      RETURN_IF_ERROR(ValidateTopLogprobs(scored.top_logprobs, where));
    }
  }
  for (size_t i = 0; i < result.sequences.size(); ++i) {
    const SequenceResult& seq = result.sequences[i];
    const std::string where = "step result: sequence " + std::to_string(i) + ": ";
    if (seq.token_id < -1) return InvalidArgument(where + "token id < -1");
    if (std::isnan(seq.logprob)) return InvalidArgument(where + "logprob is NaN");
    RETURN_IF_ERROR(ValidateTopLogprobs(seq.top_logprobs, where));
  }
  if (result.proposals.size() > static_cast<size_t>(kMaxSequencesPerStep)) {
    return InvalidArgument("step result: too many proposals");
  }
  for (const DraftProposal& proposal : result.proposals) {
    if (!AllNonNegative(proposal.token_ids) || proposal.token_ids.size() > size_t{kMaxProposalsPerSequence}) {
      return InvalidArgument("step result: proposals of seq " + std::to_string(proposal.seq_id) +
                             ": a negative id, or too many");
    }
  }
  return OkStatus();
}

std::string EncodeStepPlan(const StepPlan& plan) {
  capnp::MallocMessageBuilder message;
  wire_convert::FillStepPlan(plan, message.initRoot<wire::StepPlan>());
  return wire_convert::ToBytes(message);
}

StatusOr<StepPlan> DecodeStepPlan(std::string_view bytes, const DecodeLimits& limits) {
  StepPlan plan;
  RETURN_IF_ERROR(wire_convert::ReadFlatMessage(bytes, limits, [&](capnp::MessageReader& reader) {
    plan = wire_convert::ReadStepPlan(reader.getRoot<wire::StepPlan>());
  }));
  RETURN_IF_ERROR(ValidateStepPlan(plan));
  return plan;
}

std::string EncodeStepResult(const StepResult& result) {
  capnp::MallocMessageBuilder message;
  wire_convert::FillStepResult(result, message.initRoot<wire::StepResult>());
  return wire_convert::ToBytes(message);
}

StatusOr<StepResult> DecodeStepResult(std::string_view bytes, const DecodeLimits& limits) {
  StepResult result;
  RETURN_IF_ERROR(wire_convert::ReadFlatMessage(bytes, limits, [&](capnp::MessageReader& reader) {
    result = wire_convert::ReadStepResult(reader.getRoot<wire::StepResult>());
  }));
  RETURN_IF_ERROR(ValidateStepResult(result));
  return result;
}

}  // namespace tpserve
