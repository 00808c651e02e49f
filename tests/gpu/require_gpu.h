// GPU tests skip (GTEST_SKIP) where no CUDA device is visible, so CI on GPU-less hosts stays green.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace tpserve::testing {

inline bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace tpserve::testing

#define REQUIRE_GPU()                                                                 \
  do {                                                                                \
    if (!::tpserve::testing::HaveGpu()) GTEST_SKIP() << "no CUDA device on this host"; \
  } while (0)
