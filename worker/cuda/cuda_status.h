// CUDA and cuBLAS results as Status values, for the executor's calls whose failure a user or the
// machine can cause (allocation, a kernel fault surfacing at a sync, a missing device): the worker
// reports them and exits cleanly instead of aborting. The kernels' own launch checks stay CHECKs.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/status.h"

namespace tpserve {

// INTERNAL "<what> failed at file:line: <cudaErrorName>: <message>"; RESOURCE_EXHAUSTED for
// cudaErrorMemoryAllocation.
Status CudaStatus(cudaError_t rc, const char* what, const char* file, int line);
Status CublasStatus(cublasStatus_t rc, const char* what, const char* file, int line);

#define CUDA_RETURN_IF_ERROR(call)                                                            \
  do {                                                                                        \
    const cudaError_t _cuda_rc = (call);                                                      \
    if (_cuda_rc != cudaSuccess) return ::tpserve::CudaStatus(_cuda_rc, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_RETURN_IF_ERROR(call)                                                                \
  do {                                                                                              \
    const cublasStatus_t _cublas_rc = (call);                                                       \
    if (_cublas_rc != CUBLAS_STATUS_SUCCESS) {                                                      \
      return ::tpserve::CublasStatus(_cublas_rc, #call, __FILE__, __LINE__);                        \
    }                                                                                               \
  } while (0)

}  // namespace tpserve
