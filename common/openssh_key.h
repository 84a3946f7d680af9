// The job key's private half in OpenSSH's own format, byte for byte as ssh-keygen writes it.
// libssh 0.10 pads the private section to 16 bytes whatever the cipher, where OpenSSH pads
// an unencrypted key to 8 (the block size of cipher "none"): OpenSSH and paramiko read that
// anyway, but asyncssh, which checks the padding strictly, refuses the key. So the file is
// encoded here, from key material libsodium makes, and libssh only reads it back.
//
// The format (PROTOCOL.key in openssh-portable; written by sshkey.c,
// sshkey_private_to_blob2), every "string" a uint32 length (big-endian) and its bytes:
//
//   "openssh-key-v1\0"
//   string ciphername "none", string kdfname "none", string kdfoptions ""
//   uint32 number of keys, 1
//   string public key: string "ssh-ed25519", string the 32-byte public key
//   string private section:
//     uint32 check, uint32 check (equal: a wrong passphrase shows as a mismatch)
//     string "ssh-ed25519", string the public key, string the 64-byte private key
//     (seed then public key), string comment
//     bytes 1, 2, 3, ... until the section's length is a multiple of 8
//
// armoured as "-----BEGIN OPENSSH PRIVATE KEY-----", base64 in lines of 70, the END line.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace tmpi {

// An Ed25519 key as OpenSSH stores it: the private key is the 32-byte seed followed by the
// public key (libsodium's crypto_sign secret key is the same 64 bytes).
struct Ed25519Material {
  std::array<unsigned char, 32> public_key{};
  std::array<unsigned char, 64> private_key{};
  std::uint32_t check = 0;  // any value; OpenSSH draws it at random
};

// OpenSSH's block size for an unencrypted key (cipher.c: "none" has block size 8).
inline constexpr std::size_t kOpenSshBlockSize = 8;

// The public key as the SSH wire carries it (string "ssh-ed25519", string the key), and as a
// line of authorized_keys or known_hosts ("ssh-ed25519 BASE64 comment"). Pure.
std::string openssh_ed25519_public_blob(const std::array<unsigned char, 32>& public_key);
std::string openssh_ed25519_public_line(const std::array<unsigned char, 32>& public_key,
                                        std::string_view comment);

// The armoured private key file for `key`, unencrypted, as ssh-keygen would write it. Pure.
std::string openssh_ed25519_private_key(const Ed25519Material& key, std::string_view comment);

// A new Ed25519 key (libsodium's crypto_sign_keypair), encoded by the function above. The
// material is wiped once encoded.
Expected<std::string> new_openssh_ed25519_private_key(std::string_view comment);

}  // namespace tmpi
