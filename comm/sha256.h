// SHA-256 (FIPS 180-4), for model fingerprints: small and dependency-free, not for secrets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpserve {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The 32-byte digest. The object is spent afterwards.
  std::array<uint8_t, 32> Finish();

  // One-shot helpers.
  static std::string Digest(std::string_view data);     // 32 raw bytes
  static std::string HexDigest(std::string_view data);  // 64 hex characters

 private:
  void Compress(const uint8_t* block);  // block: [64]

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace tpserve
