// One check macro per CUDA API family, with file:line. A failing CUDA or cuBLAS call on a
// worker is a broken device or a programming error, so these abort like CHECK.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(expr)                                                                       \
  do {                                                                                         \
    const cudaError_t _err = (expr);                                                           \
    if (_err != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: CUDA error %s: %s in %s\n", __FILE__, __LINE__,             \
                   cudaGetErrorName(_err), cudaGetErrorString(_err), #expr);                   \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                         \
    const cublasStatus_t _st = (expr);                                                         \
    if (_st != CUBLAS_STATUS_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: cuBLAS error %s in %s\n", __FILE__, __LINE__,               \
                   cublasGetStatusString(_st), #expr);                                         \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

// After a kernel launch: reports a bad launch configuration at its call site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
