// Does this sshd accept the job key, and present it as its host key? One libssh session:
// connect (curve25519-sha256 first), compare the server's host key with the job's public
// key, then authenticate with the job's private key. The sidecar asks it of its own sshd;
// the launcher's preflight asks it of every host.
#pragma once

#include <memory>
#include <string>

#include "common/backoff.h"
#include "common/error.h"

struct ssh_session_struct;  // libssh's, as <libssh/libssh.h> declares it

namespace tmpi {

struct SshTarget {
  std::string host;
  int port = 2222;
  std::string user;  // default: the running user
  Millis timeout{5000};
  // Whether the check runs `exec true` too (ssh_probe.cpp, command_problem). The launcher's
  // relay skips it where MPI's daemon start over the same session is the proof (ssh/relay.h).
  bool run_command = true;
};

struct SshVerdict {
  bool ok = false;
  std::string problem;  // "sshd refused the job key", "sshd presents another host key", ...
};

// A libssh session (ssh_session), disconnected and freed with its owner.
struct SshSessionClose {
  void operator()(ssh_session_struct* session) const;
};
using SshSessionPtr = std::unique_ptr<ssh_session_struct, SshSessionClose>;

// The user sshd is asked for: the running user's name (passwd, else $USER, else root).
const std::string& ssh_login_user();

// `private_key` is the job key's text; its public half is the expected host key. With
// `keep`, a session that passed is moved there, connected and authenticated, for the
// launcher's relay (ssh/relay.h) to run mpirun's daemons over; else it is closed.
SshVerdict probe_ssh(const SshTarget& target, const std::string& private_key, SshSessionPtr* keep = nullptr);

}  // namespace tmpi
