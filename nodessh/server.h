// mpi-sshd's server: a listener that forks a process per connection. Its own listening
// socket feeds accepted sockets to libssh (ssh_bind_accept_fd), so that the admission's
// bounds are kept before libssh reads a byte. Each connection is a monitor (it starts, reaps
// and signals the commands, and verifies the login itself: monitor.cpp) and a session process
// under a seccomp filter (sandbox.h) that runs the key exchange, the login and the channels in
// its own loop (connection_process.cpp). The commands' pipes are in that loop too, each
// watched only while there is room to act on it (a channel window open, bytes to write), so
// that a slow client slows its own command and nothing else.
//
// The rules are elsewhere and pure: session_rules.h (who logs in, the bounds),
// channel_rules.h (what a channel may do, and the end of its command). This file and
// channels.cpp only carry them out.
#pragma once

#include <memory>

#include "common/error.h"
#include "nodessh/session_rules.h"

namespace tmpi::nodessh {

class Server {
 public:
  // Reads the job key from options.ssh_dir (keeping its public half and the host key derived
  // from it) and listens; errors name the file or the port.
  static Expected<std::unique_ptr<Server>> open(const SshdOptions& options);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  int port() const;
  // Serves until SIGTERM or SIGINT; then hangs up every command's group, kills what is left
  // after the grace, and returns.
  Status run();

  struct State;

 private:
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tmpi::nodessh
