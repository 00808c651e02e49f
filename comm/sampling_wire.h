// Internal to comm/: the one copy between SamplingParams (comm/step_plan.h) and the SamplingParams of
// comm/schema/common.capnp, used by both protocols (client_codec.cc for generate requests,
// wire_convert.cc for step plans). num_logprobs is not part of it: each protocol carries it in its
// own message (GenerateRequest.numLogprobs, SequencePlan.numLogprobs).
#pragma once

#include "comm/schema/common.capnp.h"
#include "comm/step_plan.h"

namespace tpserve::sampling_wire {

void FillSamplingParams(const SamplingParams& params, common_wire::SamplingParams::Builder out);
// Every field but num_logprobs. May throw kj::Exception on malformed input (callers catch it);
// callers that must bound the logit bias list check in.getLogitBias().size() first.
SamplingParams ReadSamplingParams(common_wire::SamplingParams::Reader in);

}  // namespace tpserve::sampling_wire
