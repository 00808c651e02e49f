// The fingerprint a worker group sends in Hello so the coordinator can check both sides load the
// same model file: its size and the SHA-256 of its first min(size, kFingerprintPrefixBytes) bytes
// (for GGUF: the header, all metadata including the tokenizer, and the tensor table).
#pragma once

#include <cstdint>
#include <string>

#include "comm/worker_message.h"
#include "common/status.h"

namespace tpserve {

inline constexpr uint64_t kFingerprintPrefixBytes = uint64_t{8} << 20;

// NOT_FOUND if the file cannot be opened, DATA_LOSS if reading it fails.
// For a directory (safetensors), fingerprints the concatenation of its sorted regular files' sizes,
// names and prefixes.
StatusOr<ModelFingerprint> ComputeModelFingerprint(const std::string& path);

}  // namespace tpserve
