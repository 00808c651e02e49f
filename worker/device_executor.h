// The device a rank computes on, and the executor for it: `--device cpu` (ModelExecutor, always
// built) or `--device cuda` (CudaExecutor, built when CMake found CUDA and NCCL). tpserve-run,
// tpserve-worker and the engine benchmarks build their rank's executor here, so the drivers (local
// generation, the group leader, the coordinator session) run unchanged on either.
#pragma once

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

// OK when `device` can run here: FAILED_PRECONDITION when this build has no CUDA backend, or no CUDA
// device is visible. Callers check it before launching a group, so the error comes once, clearly.
Status CheckDeviceAvailable(Device device);

// This rank's executor on `device` over the group communicator `comm` (borrowed; options.tp_rank and
// tp_size must match it) and the KV blocks it allocated. Errors: the executor's Create errors.
StatusOr<LoadedShard> LoadShard(Device device, const ModelFile& model, Communicator* comm,
                                const ExecutorOptions& options);

}  // namespace tpserve
