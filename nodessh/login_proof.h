// The monitor's own check of a login (monitor.cpp): it does not take the session process's
// word that a client logged in with the job key, since that process parses a stranger's bytes
// and may be the stranger's by then. libssh checks the client's signature inside the session
// process and gives neither the signed bytes nor the session id to its callback; but it hands
// both to libcrypto (libssh 0.10 src/pki_crypto.c, pki_verify_data_signature:
// EVP_DigestVerify(ctx, signature, input) where input is what src/messages.c,
// ssh_msg_userauth_build_digest, built: string session id, byte SSH_MSG_USERAUTH_REQUEST,
// string user, string service, string "publickey", bool TRUE, string algorithm, string key).
// The session process catches that call on its way to libcrypto (monitor.cpp) and sends the
// pair; here the monitor checks the bytes' shape itself and verifies the signature against
// the job key's public half with libcrypto, as libssh would, and never takes a session id
// twice. No pair caught, no login.
//
// What it proves: the holder of the job key signed a login for a session with that id. What it
// cannot: that the id is this connection's (only the session process knows its key exchange,
// and every pod's host key is the same). A session process taken over could present a pair
// captured elsewhere, where it had one: the "once" holds per connection (a monitor's own set),
// not per server or job. Binding the id needs the monitor to sign the key exchange itself
// (libssh 0.10 signs in the session's process); said in the design as what is left.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common/error.h"

using EVP_PKEY = struct evp_pkey_st;

namespace tmpi::nodessh {

// The fields of a signed userauth request, once their shape is checked. Pure.
struct SignedLogin {
  std::string session_id;
  std::string user;
  std::string algorithm;  // "ssh-ed25519", "ecdsa-sha2-nistp521", "rsa-sha2-512"...
  std::string key_blob;
};
Expected<SignedLogin> parse_signed_login(std::string_view blob);

class LoginVerifier {
 public:
  // The job key's public half as the SSH wire carries it (ssh_pki_export_pubkey_blob).
  static Expected<LoginVerifier> for_job_key(std::string key_blob);
  // The user name when `signature` over `blob` is the job key's, for a login to
  // "ssh-connection" by "publickey" with the job key, under a session id never seen before.
  Expected<std::string> check(std::string_view blob, std::string_view signature);

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* key) const;
  };
  std::string key_blob_;
  std::string key_type_;
  std::shared_ptr<EVP_PKEY> key_;
  std::set<std::string> seen_session_ids_;
};

}  // namespace tmpi::nodessh
