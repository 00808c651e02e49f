// Internal to comm/: copies between the plain structs of comm/step_plan.h and their Cap'n Proto
// builders/readers (comm/schema/worker.capnp). Shared by plan_codec.cc and worker_message.cc.
// Read* may throw kj::Exception on malformed input; callers catch it (see ReadFlatMessage).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <capnp/message.h>

#include "comm/plan_codec.h"
#include "comm/schema/worker.capnp.h"
#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve::wire_convert {

void FillStepPlan(const StepPlan& plan, wire::StepPlan::Builder out);
StepPlan ReadStepPlan(wire::StepPlan::Reader in);
void FillStepResult(const StepResult& result, wire::StepResult::Builder out);
StepResult ReadStepResult(wire::StepResult::Reader in);

// The flat-array bytes of a built message.
std::string ToBytes(capnp::MessageBuilder& message);

// Parses `bytes` as one flat-array message under `limits` and calls `read` with the reader;
// any Cap'n Proto exception (truncated, misaligned-size, out-of-bounds pointers, traversal or
// nesting limit) becomes DATA_LOSS.
Status ReadFlatMessage(std::string_view bytes, const DecodeLimits& limits,
                       const std::function<void(capnp::MessageReader&)>& read);

}  // namespace tpserve::wire_convert
