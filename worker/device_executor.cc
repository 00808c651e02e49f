#include "worker/device_executor.h"

#include <memory>

#include "common/logging.h"
#include "model/model_file.h"

#if TPSERVE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "worker/cuda/cuda_executor.h"
#endif

namespace tpserve {
namespace {

// A StepExecutor over an executor owned elsewhere in the LoadedShard's lifetime.
template <typename Executor>
LoadedShard Share(std::unique_ptr<Executor> executor) {
  const int64_t num_blocks = executor->num_kv_blocks();
  std::shared_ptr<Executor> shared = std::move(executor);
  return LoadedShard{
      std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) { return shared->Execute(plan); }),
      num_blocks};
}

}  // namespace

StatusOr<Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return InvalidArgument("--device must be cpu or cuda, not '" + name + "'");
}

const char* DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

Status CheckDeviceAvailable(Device device) {
  if (device == Device::kCpu) return OkStatus();
#if TPSERVE_HAVE_CUDA
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    return FailedPrecondition(std::string("--device cuda: no usable CUDA device (") + cudaGetErrorName(rc) + ": " +
                              cudaGetErrorString(rc) + ")");
  }
  if (count == 0) return FailedPrecondition("--device cuda: no CUDA device is visible");
  return OkStatus();
#else
  return FailedPrecondition("--device cuda: this build has no CUDA backend (CMake found no nvcc and NCCL; "
                            "rebuild on a machine with the CUDA toolkit)");
#endif
}

StatusOr<LoadedShard> LoadShard(Device device, const ModelFile& model, Communicator* comm,
                                const ExecutorOptions& options) {
  if (device == Device::kCuda) {
#if TPSERVE_HAVE_CUDA
    ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor, CudaExecutor::Create(model, comm, options));
    return Share(std::move(executor));
#else
    return CheckDeviceAvailable(device);
#endif
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor, ModelExecutor::Create(model, comm, options));
  return Share(std::move(executor));
}

}  // namespace tpserve
