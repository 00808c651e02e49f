#include "comm/model_fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "comm/sha256.h"

namespace tpserve {
namespace {

// Feeds the first min(size, kFingerprintPrefixBytes) bytes of `path` to `sha`; returns the size.
StatusOr<uint64_t> HashPrefix(const std::filesystem::path& path, Sha256& sha) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound("model fingerprint: cannot stat " + path.string() + ": " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("model fingerprint: cannot open " + path.string());
  std::vector<char> buffer(1 << 20);
  uint64_t left = std::min(size, kFingerprintPrefixBytes);
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
    in.read(buffer.data(), static_cast<std::streamsize>(want));
    if (static_cast<size_t>(in.gcount()) != want) {
      return DataLoss("model fingerprint: short read from " + path.string());
    }
    sha.Update(buffer.data(), want);
    left -= want;
  }
  return size;
}

}  // namespace

StatusOr<ModelFingerprint> ComputeModelFingerprint(const std::string& path) {
  std::error_code ec;
  Sha256 sha;
  ModelFingerprint fingerprint;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (ec) return NotFound("model fingerprint: cannot list " + path + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      sha.Update(file.filename().string());
      ASSIGN_OR_RETURN(uint64_t size, HashPrefix(file, sha));
      fingerprint.file_size += size;
    }
  } else {
    ASSIGN_OR_RETURN(fingerprint.file_size, HashPrefix(path, sha));
  }
  std::array<uint8_t, 32> digest = sha.Finish();
  fingerprint.sha256.assign(reinterpret_cast<const char*>(digest.data()), digest.size());
  return fingerprint;
}

}  // namespace tpserve
