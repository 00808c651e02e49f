// Registers the CUDA executor with worker/device_executor before main, in every binary these objects
// are linked into (tpserve-run-cuda, tpserve-worker-cuda, the GPU tests and benchmarks).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "worker/cuda/cuda_executor.h"
#include "worker/device_executor.h"

namespace tpserve {
namespace {

Status CudaAvailable() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    return FailedPrecondition(std::string("--device cuda: no usable CUDA device (") + cudaGetErrorName(rc) + ": " +
                              cudaGetErrorString(rc) + ")");
  }
  if (count == 0) return FailedPrecondition("--device cuda: no CUDA device is visible");
  return OkStatus();
}

StatusOr<LoadedShard> LoadCudaShard(const ModelFile& model, Communicator* comm, const ExecutorOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor, CudaExecutor::Create(model, comm, options));
  return ShareExecutor(std::move(executor));
}

[[maybe_unused]] const bool kRegistered = RegisterCudaBackend({&CudaAvailable, &LoadCudaShard});

}  // namespace
}  // namespace tpserve
