// DeviceBuffer: an owned allocation of device memory (cudaMalloc / cudaFree), move-only.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace tpserve {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // RESOURCE_EXHAUSTED (naming `what`, the bytes asked and the bytes free) when the device is full.
  static StatusOr<DeviceBuffer> Allocate(size_t bytes, const char* what);
  // The same, filled from host memory `src` (synchronous copy).
  static StatusOr<DeviceBuffer> FromHost(const void* src, size_t bytes, const char* what);
  // Makes the buffer at least `bytes` large (contents are lost when it grows).
  Status Reserve(size_t bytes, const char* what);

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tpserve
