// The coordinator <-> worker protocol decoders (WorkerMessage, and the StepPlan / StepResult the
// leader broadcasts and returns) on arbitrary bytes: never a crash; a decoded plan is validated.
#include <cstdint>
#include <string_view>

#include "comm/plan_codec.h"
#include "comm/worker_message.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto m = DecodeWorkerMessage(bytes); m.ok()) (void)WorkerMessageName(*m);
  if (auto plan = DecodeStepPlan(bytes); plan.ok()) (void)ValidateStepPlan(*plan);
  if (auto result = DecodeStepResult(bytes); result.ok()) (void)ValidateStepResult(*result);
  return 0;
}
