// One remote command over a connection that is already open and authenticated: what ssh
// does after its handshake, for the launcher's relay (ssh/relay.h).
//
// The session is put in non-blocking mode, and one loop polls its socket, the caller's stdin
// and the caller's own socket every 100 ms at most: the command's stdout and stderr go to the
// caller's descriptors, its stdin comes from theirs (EOF passed on as EOF), and the loop ends
// when the remote side closes the channel, when the caller goes away (MPI killed its ssh: the
// channel is closed, as sshd would see a killed ssh's connection close), or when the relay
// stops. No step waits on the network, or on the caller, for longer than that poll: a host
// cut off by a partition, or a caller whose output pipe nobody drains (its output waits in a
// bounded buffer, and the channel's window holds the command back), holds one relay thread
// for at most 100 ms after the launcher stops.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "common/ssh_probe.h"
#include "ssh/terminal.h"

namespace tmpi::launch {

struct RemoteCall {
  std::string command;              // for the remote user's shell, as ssh sends it; empty: a login shell
  int in = -1, out = -1, err = -1;  // the caller's stdin, stdout, stderr
  int caller = -1;                  // the caller's socket: readable or hung up once it is gone; -1: none
  int wake = -1;                    // readable once `stop` is set: every wait ends then
  // A person's session (mpi-ssh-client): a pty of this size first, and its window's changes,
  // each sent at the size of the terminal on `in`.
  std::optional<PtyRequest> pty;
  WindowChanges* window = nullptr;
};

struct RemoteExit {
  int status = 255;           // the command's exit status; 255 as ssh for anything else
  std::string problem;        // empty when the command ran to its end
  bool session_lost = false;  // the connection itself failed: no further command may use it
  // The first bytes of its output, stdout and stderr as they came: what a daemon that could
  // not start said (an account's nologin, a program not found), for the relay to name it.
  std::string said;
};

// Whether the caller's socket is readable or hung up: it never writes after its request, so
// either means it is gone (MPI killed its ssh).
bool caller_gone(int caller);

RemoteExit run_remote(ssh_session_struct* session, const RemoteCall& call, const std::atomic<bool>& stop);

}  // namespace tmpi::launch
