#include "client/sha256.h"

#include <openssl/evp.h>

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace shardrt {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256& Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::Field(absl::string_view bytes) {
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((uint64_t{bytes.size()} >> (8 * i)));
  return Update(absl::string_view(length, 8)).Update(bytes);
}

std::string Sha256::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string HexDigest(absl::string_view digest) {
  std::string hex;
  for (unsigned char c : digest) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  return hex;
}

}  // namespace shardrt
