// A worker group that generates forever, for rank_kill_test: every rank writes its pid to
// DIR/rank<r>.pid once the group is up, and the leader rewrites DIR/steps with the number of steps
// done (each step = a plan broadcast + an all-reduce of 64 Ki floats on every rank). Killing or
// stopping any rank must end every other rank and mpirun with an error.
//   mpirun -np N group_kill_helper DIR
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "worker/group_process.h"
#include "worker/group_runtime.h"

namespace tpserve {
namespace {

class AllReduceExecutor : public StepExecutor {
 public:
  explicit AllReduceExecutor(Communicator* comm) : comm_(comm), data_(65536, 1.0f) {}
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    RETURN_IF_ERROR(comm_->AllReduceSum(data_.data(), data_.size()));
    for (float& x : data_) x = 1.0f;
    StepResult result;
    result.step_id = plan.step_id;
    return result;
  }

 private:
  Communicator* comm_;
  std::vector<float> data_;  // [65536]
};

void WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), path.c_str());  // readers never see a partial file
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np N group_kill_helper DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  return tpserve::RunMpiProcess(&argc, &argv, "group_kill_helper", [&]() -> tpserve::Status {
    tpserve::GroupRuntimeOptions options;  // collective deadlines 30 s: a lost rank is the heartbeat's to notice
    auto make = [&](tpserve::Communicator* comm) -> tpserve::StatusOr<tpserve::LoadedShard> {
      tpserve::WriteFile(dir + "/rank" + std::to_string(comm->rank()) + ".pid", std::to_string(getpid()));
      return tpserve::LoadedShard{std::make_unique<tpserve::AllReduceExecutor>(comm), 1};
    };
    auto lead = [&](tpserve::GroupLeader& group, const tpserve::GroupInfo&) -> tpserve::Status {
      tpserve::StepPlan plan;
      plan.sequences.resize(1);
      plan.sequences[0].token_ids = {1};
      for (uint64_t step = 1;; ++step) {
        plan.step_id = step;
        ASSIGN_OR_RETURN(tpserve::StepResult result, group.Execute(plan));
        if (step % 10 == 0) tpserve::WriteFile(dir + "/steps", std::to_string(step));
      }
    };
    return tpserve::RunGroup(make, lead, options);
  });
}
