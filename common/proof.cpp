// See proof.h. libsodium needs no library-wide set-up beyond sodium_init(), which is cheap
// and idempotent: OpenSSL 3 loads its providers and configuration on first use, ~4 ms of
// CPU in every rank agent (bench/rows/launcher.sh).
#include "common/proof.h"

#include <sodium.h>

#include <cstdio>
#include <cstdlib>

namespace tmpi {

namespace {

void ensure_sodium() {
  // Fails only when the system has no source of randomness at all: no proof can be made.
  if (sodium_init() < 0) {
    std::fputs("trainer-mpi: libsodium could not initialise (no source of randomness)\n", stderr);
    std::abort();
  }
}

std::string to_hex(const unsigned char* data, std::size_t size) {
  std::string out(size * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data, size);
  out.pop_back();
  return out;
}

// HMAC-SHA256 (RFC 2104) for a key of any length, as OpenSSL and Python's hmac compute it.
std::string hmac_raw(std::string_view key, std::string_view message) {
  ensure_sodium();
  crypto_auth_hmacsha256_state state;
  unsigned char digest[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                                message.size());
  crypto_auth_hmacsha256_final(&state, digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
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
         sodium_memcmp(expected_hex.data(), received_hex.data(), expected_hex.size()) == 0;
}

std::string random_nonce() {
  ensure_sodium();
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  return to_hex(bytes, sizeof bytes);
}

}  // namespace tmpi
