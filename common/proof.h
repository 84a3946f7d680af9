// Proofs that a message comes from a pod of this job. Every pod holds the job's private
// key (the launcher made it or read it from the Secret; nodes mount that Secret), and
// nobody else does, so a key derived from it authenticates rendezvous messages with no
// extra secret, whether the key is ours or Trainer's. HMAC-SHA256 from libsodium.
#pragma once

#include <string>
#include <string_view>

namespace tmpi {

// The rendezvous key: HMAC-SHA256(private key text without whitespace, a fixed label),
// so that the same key read from different files (trailing newline or not) agrees.
std::string derive_rendezvous_key(std::string_view private_key_text);

// Lower-case hex HMAC-SHA256 of message under key.
std::string hmac_hex(std::string_view key, std::string_view message);

// Constant-time comparison of a received proof with the expected one.
bool proof_matches(std::string_view expected_hex, std::string_view received_hex);

// 16 random bytes as hex, for nonces.
std::string random_nonce();

}  // namespace tmpi
