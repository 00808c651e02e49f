#include "worker/cuda/cuda_status.h"

#include <string>

namespace tpserve {

Status CudaStatus(cudaError_t rc, const char* what, const char* file, int line) {
  std::string message = std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc);
  if (rc == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

Status CublasStatus(cublasStatus_t rc, const char* what, const char* file, int line) {
  return Internal(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cublasGetStatusString(rc));
}

}  // namespace tpserve
