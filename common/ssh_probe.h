// Does this sshd accept the job key, and present it as its host key? One libssh session:
// connect (curve25519-sha256 first), compare the server's host key with the job's public
// key, then authenticate with the job's private key. The sidecar asks it of its own sshd;
// the launcher's preflight asks it of every host.
#pragma once

#include <string>

#include "common/backoff.h"
#include "common/error.h"

namespace tmpi {

struct SshTarget {
  std::string host;
  int port = 2222;
  std::string user;  // default: the running user
  Millis timeout{5000};
};

struct SshVerdict {
  bool ok = false;
  std::string problem;  // "sshd refused the job key", "sshd presents another host key", ...
};

// `private_key` is the job key's text; its public half is the expected host key.
SshVerdict probe_ssh(const SshTarget& target, const std::string& private_key);

}  // namespace tmpi
