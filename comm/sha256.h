// SHA-256 (FIPS 180-4) for model fingerprints, computed by OpenSSL's libcrypto (EVP).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace tpserve {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The 32-byte digest. The object is spent afterwards.
  std::array<uint8_t, 32> Finish();

  // One-shot helpers.
  static std::string Digest(std::string_view data);     // 32 raw bytes
  static std::string HexDigest(std::string_view data);  // 64 hex characters

 private:
  struct FreeContext {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> context_;
};

}  // namespace tpserve
