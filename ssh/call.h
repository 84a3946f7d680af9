// What MPI asked of ssh, and how that request crosses to the launcher's relay.
//
// mpirun, prterun and hydra start their daemons with `<agent> [ssh options] HOST CMD...`,
// where the agent is ssh (Open MPI's plm_rsh_module.c: the agent's argv, then plm_rsh_args
// split on spaces, then the node's name, then the daemon's command; its stdin /dev/null). In
// a launch with the ssh check beside it, the agent is mpi-ssh (ssh/main.cpp), which reads
// that same command line in OpenSSH's grammar (ssh(1): the options before the host, each
// with or without an argument; the command's words joined by spaces, for the remote shell)
// and hands it to the relay (ssh/relay.h), which runs it over the check's own connection.
//
// Only what the relay can honour is relayed: a port, a user and the ssh options the
// launcher itself gives (-F -i -o -x -q -T -n ...). Anything else (a forwarding, a tty, a
// jump host, a subsystem, an option it does not know) makes mpi-ssh exec the real ssh with
// the same arguments, as if it had never been there.
//
// The request on the relay's socket: "tmpi-ssh-relay 1\n", a 4-byte little-endian length,
// then HOST \0 USER \0 PORT \0 COMMAND, the caller's stdin, stdout and stderr passed along as
// SCM_RIGHTS. The answer: one line, "exit N", "fallback" or "fail REASON".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmpi::launch {

inline constexpr std::string_view kRelayMagic = "tmpi-ssh-relay 1\n";
inline constexpr std::size_t kRelayMaxRequest = 1U << 20;  // a daemon's command line, with room

struct SshCall {
  std::string host;
  std::string user;         // empty: the running user, as ssh has it
  std::optional<int> port;  // -p, or -o Port=
  std::string command;      // the words after the host, joined by single spaces
  bool no_stdin = false;    // -n: the command reads /dev/null
  // What a client of its own needs (mpi-ssh-client; the relay's connection already has them),
  // each its first value, as ssh takes the first value of an option:
  std::string identity_file;             // -i, -o IdentityFile
  std::string known_hosts_file;          // -o UserKnownHostsFile
  std::string config_file;               // -F
  std::optional<bool> strict_host_keys;  // -o StrictHostKeyChecking: yes or anything else
  // A person's terminal, for mpi-ssh-client (ssh/terminal.h); the relay serves none.
  int tty_requests = 0;  // -t given: once, a pty where stdin is a terminal; twice (-tt), always
  bool no_tty = false;   // -T
  bool quiet = false;    // -q, or -o LogLevel below INFO: no notice on stderr, only errors
  // Empty when the relay and mpi-ssh-client can run it; else why not (mpi-ssh then runs the
  // real ssh).
  std::string not_relayable;
};

// argv after the program's name, in ssh(1)'s grammar.
SshCall parse_ssh_call(const std::vector<std::string>& args);

// Why the relay cannot run `call`, or empty: not_relayable, or a login (no command) or a
// terminal (-t), which need a session of their own.
std::string relay_refusal(const SshCall& call);

// The request's body (after the magic line and the length) and its reading back: nullopt
// for anything malformed (four fields, a port in 1..65535 or empty, no field too long).
std::string encode_relay_request(const SshCall& call);
std::optional<SshCall> decode_relay_request(std::string_view body);

}  // namespace tmpi::launch
