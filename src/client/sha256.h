// Sha256: the SHA-256 digest (OpenSSL) that names compile-cache entries and checks their
// payloads. Private to the client layer. One hasher per thread (not thread-safe); HexDigest is
// pure.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace shardrt {

// SHA-256 of the concatenation of the parts fed to it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Adds `bytes`.
  Sha256& Update(absl::string_view bytes);
  // Adds `bytes` length-prefixed (8 bytes, little-endian), so consecutive parts cannot run
  // together.
  Sha256& Field(absl::string_view bytes);
  // The 32-byte digest; the hasher must not be used afterwards.
  std::string Finish();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// 64 lowercase hex digits of a 32-byte digest.
std::string HexDigest(absl::string_view digest);

}  // namespace shardrt
