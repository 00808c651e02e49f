#include "worker/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "worker/cuda/cuda_status.h"

namespace tpserve {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes, const char* what) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t rc = cudaMalloc(&buffer.data_, bytes);
  if (rc == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return ResourceExhausted(std::string("device memory for ") + what + ": " + std::to_string(bytes) +
                             " bytes asked, " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                             " free");
  }
  CUDA_RETURN_IF_ERROR(rc);
  buffer.bytes_ = bytes;
  return buffer;
}

StatusOr<DeviceBuffer> DeviceBuffer::FromHost(const void* src, size_t bytes, const char* what) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, Allocate(bytes, what));
  if (bytes > 0) CUDA_RETURN_IF_ERROR(cudaMemcpy(buffer.data_, src, bytes, cudaMemcpyHostToDevice));
  return buffer;
}

Status DeviceBuffer::Reserve(size_t bytes, const char* what) {
  if (bytes <= bytes_) return OkStatus();
  *this = DeviceBuffer();  // free first: the old contents are not kept
  ASSIGN_OR_RETURN(*this, Allocate(bytes, what));
  return OkStatus();
}

}  // namespace tpserve
