// The device a rank computes on, and the executor for it: `--device cpu` (ModelExecutor, always
// built) or `--device cuda` (CudaExecutor). tpserve-run, tpserve-worker and the engine benchmarks build
// their rank's executor here, so the drivers (local generation, the group leader, the coordinator
// session) run unchanged on either.
//
// The CUDA executor is not linked into tpserve-run and tpserve-worker: loading CUDA's libraries costs
// every process ~150 MB and 0.1 s at start-up, GPU or not (bench/README.md). Where CMake found CUDA and
// NCCL it builds their twins tpserve-run-cuda and tpserve-worker-cuda, whose worker/cuda objects
// register the CUDA backend (RegisterCudaBackend) before main; `--device cuda` on a binary without it
// re-executes its `-cuda` twin (ExecCudaTwinIfNeeded).
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "common/status.h"
#include "worker/group_runtime.h"
#include "worker/model_executor.h"

namespace tpserve {

class ModelFile;

enum class Device { kCpu, kCuda };

// "cpu" or "cuda"; INVALID_ARGUMENT otherwise.
StatusOr<Device> ParseDevice(const std::string& name);
const char* DeviceName(Device device);

// For `--device cuda` in a binary without the CUDA backend: replaces this process with the `-cuda`
// twin beside it (this executable's path + "-cuda"), same argv, and so returns only on failure:
// FAILED_PRECONDITION naming the twin when there is none (CMake found no CUDA or NCCL), UNAVAILABLE
// when exec fails. OK at once for the CPU, or when this binary has the backend. Call it before MPI_Init.
Status ExecCudaTwinIfNeeded(Device device, char** argv);

// OK when `device` can run here: FAILED_PRECONDITION when this binary has no CUDA backend, or no CUDA
// device is visible. Callers check it before launching a group, so the error comes once, clearly.
Status CheckDeviceAvailable(Device device);

// This rank's executor on `device` over the group communicator `comm` (borrowed; options.tp_rank and
// tp_size must match it) and the KV blocks it allocated. Errors: the executor's Create errors.
StatusOr<LoadedShard> LoadShard(Device device, const ModelFile& model, Communicator* comm,
                                const ExecutorOptions& options);

// What the worker/cuda objects provide, registered once before main (worker/cuda/cuda_backend.cc).
struct CudaBackend {
  Status (*check_available)();
  StatusOr<LoadedShard> (*load_shard)(const ModelFile& model, Communicator* comm, const ExecutorOptions& options);
};
// Returns true, so that a namespace-scope constant can hold its result. REQUIRES: called once.
bool RegisterCudaBackend(const CudaBackend& backend);

// A LoadedShard whose step executor shares ownership of `executor` (any executor with Execute(plan)
// and num_kv_blocks()).
template <typename Executor>
LoadedShard ShareExecutor(std::unique_ptr<Executor> executor) {
  const int64_t num_blocks = executor->num_kv_blocks();
  std::shared_ptr<Executor> shared = std::move(executor);
  return LoadedShard{
      std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) { return shared->Execute(plan); }),
      num_blocks};
}

}  // namespace tpserve
