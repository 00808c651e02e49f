// StepExecutor: anything that runs a StepPlan and returns its StepResult — one rank's
// ModelExecutor, or a tensor-parallel group seen through its leader (GroupLeader). Drivers (the
// local generation loop, the coordinator session) take a StepExecutor and need not know which.
#pragma once

#include <functional>

#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual StatusOr<StepResult> Execute(const StepPlan& plan) = 0;
};

// Adapts a function (e.g. a lambda over ModelExecutor::Execute, or a test fake).
class FunctionStepExecutor : public StepExecutor {
 public:
  using Function = std::function<StatusOr<StepResult>(const StepPlan&)>;
  explicit FunctionStepExecutor(Function function) : function_(std::move(function)) {}
  StatusOr<StepResult> Execute(const StepPlan& plan) override { return function_(plan); }

 private:
  Function function_;
};

}  // namespace tpserve
