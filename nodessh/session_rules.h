// The rules of one connection to mpi-sshd, and of the server as a whole, with no I/O: who
// may log in and for how long they may try, how many connections are served, and what the
// options must hold. nodessh/server.cpp asks; unit tests drive them with a manual time.
//
// The bounds, and why:
// - Unauthenticated time: 20 s by default (sshd's LoginGraceTime is 120 s). The only clients
//   are the job's own (mpirun's ssh, the launcher's libssh checks, a person through
//   `mpi-launcher shell`), all on the pod network, where a key exchange and one public-key
//   login take well under a second; 20 s still covers a loaded node, and a stranger's idle
//   connection holds a slot six times shorter.
// - Authentication attempts: 6, as sshd's MaxAuthTries; each key offered that is not the
//   job's counts, as in sshd.
// - A client's banner: within 5 s (kBannerGrace), else the connection is closed as past its
//   grace. A client sends it first thing (RFC 4253, section 4.2); one that sends nothing is
//   idle, holds a slot, and is the first to go for a newer connection (admission.h).
// - Connections: admission.h bounds them, those logged in apart from those that are not.
#pragma once

#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/error.h"

namespace tmpi::nodessh {

inline constexpr Millis kBannerGrace{5000};

struct SshdOptions {
  std::string ssh_dir;  // the job key (host key and the one authorized key) lives here
  std::string listen_address = "::";
  int port = 2222;
  int max_connections = 256;    // logged in at once
  int max_startups = 64;        // not logged in yet, in all
  int per_source_startups = 8;  // not logged in yet, from one address
  Millis login_grace{20000};
  int max_auth_tries = 6;
  std::vector<std::string> accept_env;
  Millis hangup_grace{2000};
};

// The patterns of --sshd-accept-env: names, with * and ?, nothing else (sshd_config's
// AcceptEnv); a bad one is named, with its fix.
Status check_accept_env(const std::vector<std::string>& patterns);

enum class AuthVerdict {
  kAccepted,
  kProbeAccepted,
  kMethodsListed,  // the first "none": answered with the methods, not counted
  kDenied,
  kDeniedLast,
};

// One connection's login: the job key only, a bounded number of tries, a bounded time.
class LoginGate {
 public:
  LoginGate(Clock::time_point accepted_at, Millis grace, int max_tries)
      : deadline_(accepted_at + grace), tries_left_(max_tries) {}

  // A public key offered: `is_job_key` whether it is the job's, `signed_ok` whether the
  // client proved it holds the private half (false: it only asks whether the key would do).
  AuthVerdict on_publickey(bool is_job_key, bool signed_ok);
  // Any other method (password, keyboard-interactive, gssapi-with-mic): refused, and counted.
  AuthVerdict on_other_method();
  // The "none" method, which a client sends to learn the methods (RFC 4252, section 5.2):
  // the first is free, as in sshd; each after it is refused and counted.
  AuthVerdict on_none();
  bool authenticated() const { return authenticated_; }
  // Whether a login was tried with anything but the first "none" (OpenSSH's auth_attempted).
  bool attempted() const { return attempted_; }
  // Whether the connection has outlived its unauthenticated time.
  bool expired(Clock::time_point now) const { return !authenticated_ && now >= deadline_; }

 private:
  AuthVerdict deny();

  Clock::time_point deadline_;
  int tries_left_;
  bool authenticated_ = false;
  bool attempted_ = false;
  bool none_asked_ = false;
};

// What a refused global request or channel open was, for the log: "port forwarding
// (direct-tcpip to db:5432)". libssh's message type and subtype, and the fields it read.
struct Refused {
  int type = 0;
  int subtype = 0;
  std::string target;  // host:port of a forwarding, when there is one
};
std::string describe_refusal(const Refused& refused);

// One end of a connection as sshd names it: the address as inet_ntop writes it (an IPv4
// client of a "::" listener as plain IPv4, as canohost.c's ipv64_normalise_mapped does), and
// the port.
struct Endpoint {
  std::string address;
  int port = 0;
  bool operator==(const Endpoint&) const = default;
};
Endpoint endpoint_of(const sockaddr_storage& address);

// The variables sshd gives every command of a connection (openssh-portable session.c,
// do_setup_env): SSH_CLIENT "client-address client-port server-port" and SSH_CONNECTION
// "client-address client-port server-address server-port". Set over the client's accepted
// env requests, as sshd sets them after those.
std::vector<std::pair<std::string, std::string>> connection_env(const Endpoint& client,
                                                                const Endpoint& server);

}  // namespace tmpi::nodessh
