// See host_key.h. libsodium makes the key pair from the derived seed; openssh_key.h encodes it.
#include "common/host_key.h"

#include <sodium.h>

#include "common/openssh_key.h"

namespace tmpi {

namespace {

constexpr std::string_view kHostKeyLabel = "trainer-mpi host key v1";

}  // namespace

HostKey::~HostKey() {
  sodium_memzero(private_key.data(), private_key.size());
}

HostKey derive_host_key(std::string_view job_private_key_text) {
  if (sodium_init() < 0) std::abort();  // only without randomness, which derivation does not use
  std::string compact;
  compact.reserve(job_private_key_text.size());
  for (char c : job_private_key_text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') compact += c;
  }
  std::array<unsigned char, crypto_auth_hmacsha256_BYTES> seed{};
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(compact.data()), compact.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(kHostKeyLabel.data()),
                                kHostKeyLabel.size());
  crypto_auth_hmacsha256_final(&state, seed.data());
  sodium_memzero(&state, sizeof state);
  sodium_memzero(compact.data(), compact.size());

  Ed25519Material material;
  crypto_sign_seed_keypair(material.public_key.data(), material.private_key.data(), seed.data());
  sodium_memzero(seed.data(), seed.size());
  // Any value does (OpenSSH draws it at random); one from the public key keeps the file the
  // same on every pod and every run.
  material.check = static_cast<std::uint32_t>(material.public_key[0]) << 24 | material.public_key[1] << 16 |
                   material.public_key[2] << 8 | material.public_key[3];
  HostKey key;
  key.private_key = openssh_ed25519_private_key(material, kHostKeyComment);
  key.public_line = openssh_ed25519_public_line(material.public_key, kHostKeyComment);
  sodium_memzero(material.private_key.data(), material.private_key.size());
  return key;
}

std::string host_key_known_part(const HostKey& key) {
  std::string_view line = key.public_line;
  std::size_t type_end = line.find(' ');
  std::size_t base64_end = line.find(' ', type_end + 1);
  return std::string(line.substr(0, base64_end));
}

}  // namespace tmpi
