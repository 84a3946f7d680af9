// See proof.h.
#include "common/proof.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace tmpi {

namespace {

std::string to_hex(const unsigned char* data, std::size_t size) {
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) out += fmt::format("{:02x}", data[i]);
  return out;
}

std::string hmac_raw(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), digest, &size);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

}  // namespace

std::string derive_rendezvous_key(std::string_view private_key_text) {
  std::string compact;
  for (char c : private_key_text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') compact += c;
  }
  return hmac_raw(compact, "trainer-mpi rendezvous v1");
}

std::string hmac_hex(std::string_view key, std::string_view message) {
  std::string raw = hmac_raw(key, message);
  return to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

bool proof_matches(std::string_view expected_hex, std::string_view received_hex) {
  return expected_hex.size() == received_hex.size() &&
         CRYPTO_memcmp(expected_hex.data(), received_hex.data(), expected_hex.size()) == 0;
}

std::string random_nonce() {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof bytes);
  return to_hex(bytes, sizeof bytes);
}

}  // namespace tmpi
