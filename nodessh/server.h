// mpi-sshd's server: one process, one event loop (libssh's ssh_event), every connection.
// Its own listening socket feeds accepted sockets to libssh (ssh_bind_accept_fd), so that the
// connection bound is kept before libssh reads a byte; each connection runs its key exchange
// in non-blocking steps inside the same loop. The commands' pipes are in that loop too, each
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
  // Reads the job key from options.ssh_dir and listens; errors name the file or the port.
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
