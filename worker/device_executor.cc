#include "worker/device_executor.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/check.h"
#include "model/model_file.h"

namespace tpserve {
namespace {

// Set before main by the worker/cuda objects where they are linked in (the -cuda binaries, the GPU tests).
std::optional<CudaBackend>& RegisteredCudaBackend() {
  static std::optional<CudaBackend> backend;
  return backend;
}

}  // namespace

bool RegisterCudaBackend(const CudaBackend& backend) {
  CHECK(!RegisteredCudaBackend().has_value()) << "the CUDA backend registered twice";
  RegisteredCudaBackend() = backend;
  return true;
}

StatusOr<Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return InvalidArgument("--device must be cpu or cuda, not '" + name + "'");
}

const char* DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

Status ExecCudaTwinIfNeeded(Device device, char** argv) {
  if (device != Device::kCuda || RegisteredCudaBackend().has_value()) return OkStatus();
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return FailedPrecondition("--device cuda: cannot find this executable (/proc/self/exe: " + ec.message() + ")");
  const std::string twin = self.string() + "-cuda";
  if (::access(twin.c_str(), X_OK) != 0) {
    return FailedPrecondition("--device cuda: this build has no CUDA backend (no " + twin +
                              ": CMake found no nvcc and NCCL; rebuild on a machine with the CUDA toolkit)");
  }
  ::execv(twin.c_str(), argv);
  return Unavailable("--device cuda: could not start " + twin + ": " + std::strerror(errno));
}

Status CheckDeviceAvailable(Device device) {
  if (device == Device::kCpu) return OkStatus();
  if (!RegisteredCudaBackend().has_value()) {
    return FailedPrecondition("--device cuda: this binary has no CUDA backend (run its -cuda twin, built where "
                              "CMake found CUDA and NCCL)");
  }
  return RegisteredCudaBackend()->check_available();
}

StatusOr<LoadedShard> LoadShard(Device device, const ModelFile& model, Communicator* comm,
                                const ExecutorOptions& options) {
  if (device == Device::kCuda) {
    RETURN_IF_ERROR(CheckDeviceAvailable(device));
    return RegisteredCudaBackend()->load_shard(model, comm, options);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ModelExecutor> executor, ModelExecutor::Create(model, comm, options));
  return ShareExecutor(std::move(executor));
}

}  // namespace tpserve
