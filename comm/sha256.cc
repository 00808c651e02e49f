#include "comm/sha256.h"

#include <openssl/evp.h>

#include <cstdio>

#include "common/check.h"

namespace tpserve {

// libcrypto fails these calls only when it cannot allocate or has no SHA-256 at all: an environment
// that cannot run, not an input error.
Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  CHECK(context_ != nullptr) << "EVP_MD_CTX_new failed";
  CHECK_EQ(EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr), 1) << "EVP_DigestInit_ex(sha256) failed";
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::FreeContext::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

void Sha256::Update(const void* data, size_t size) {
  CHECK(context_ != nullptr) << "Sha256 used after Finish()";
  CHECK_EQ(EVP_DigestUpdate(context_.get(), data, size), 1) << "EVP_DigestUpdate failed";
}

std::array<uint8_t, 32> Sha256::Finish() {
  CHECK(context_ != nullptr) << "Sha256::Finish() called twice";
  std::array<uint8_t, 32> digest;
  unsigned int size = 0;
  CHECK_EQ(EVP_DigestFinal_ex(context_.get(), digest.data(), &size), 1) << "EVP_DigestFinal_ex failed";
  CHECK_EQ(size, digest.size());
  context_.reset();
  return digest;
}

std::string Sha256::Digest(std::string_view data) {
  std::array<uint8_t, 32> digest;
  unsigned int size = 0;
  CHECK_EQ(EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr), 1) << "EVP_Digest failed";
  CHECK_EQ(size, digest.size());
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

std::string Sha256::HexDigest(std::string_view data) {
  std::string hex;
  char buf[3];
  for (unsigned char c : Digest(data)) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    hex += buf;
  }
  return hex;
}

}  // namespace tpserve
