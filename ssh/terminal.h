// A person's terminal for mpi-ssh-client: `ssh HOST` (a login) or `ssh -t HOST top` typed in
// `mpi-launcher shell`, by a uid that OpenSSH's client refuses (no passwd entry).
//
// The choice of a pty is OpenSSH's (openssh-portable ssh.c, main: tty_flag): one where
// there is no command or -t was given, unless -T; none where stdin is not a terminal (or
// -n), unless -t was given twice, and a notice says so where one was wanted and not given.
// While the session has a pty, this side's terminal is raw as OpenSSH makes it (sshtty.c,
// enter_raw_mode: no echo, no line editing, no signals from keys, no output processing), so
// that every key reaches the remote shell as typed and its output comes back as the remote
// pty made it. It is put back as it was when the session ends, normally or by an error, and
// by a signal that ends the client (SIGHUP, SIGINT, SIGQUIT, SIGTERM, the ones OpenSSH's
// clientloop.c catches): its handler puts the terminal back (tcsetattr is safe in a
// handler), then the signal ends the client as it would have, so that its caller still sees
// the signal. A change of the window's size (SIGWINCH) reaches the remote pty as a
// "window-change" (clientloop.c, client_check_window_change): the signal only writes a byte
// to a pipe, which the session's loop watches (ssh/channel.h).
//
// Unlike OpenSSH's client there is no escape character (`~.`): a session stuck on a dead
// host ends with the keepalive of the server's side, or with the shell's own end.
#pragma once

#include <termios.h>

#include <array>
#include <csignal>
#include <optional>
#include <string>

#include "ssh/call.h"

namespace tmpi::launch {

struct PtyRequest {
  std::string term;  // $TERM, as OpenSSH sends it ("" where unset)
  int cols = 80, rows = 24;
};

struct TerminalChoice {
  bool pty = false;
  std::string notice;  // for stderr, where ssh would print one (-q: none)
};

// Whether `call` gets a pty, given whether this side's stdin is a terminal.
TerminalChoice choose_terminal(const SshCall& call, bool stdin_is_terminal);

// The size of the terminal on `fd` (TIOCGWINSZ), with $TERM; where it has none, 80x24, this
// client's own choice (OpenSSH's sends 0x0 and leaves the size to the remote side).
PtyRequest terminal_size(int fd);

// The terminal on `fd` made raw for the session's life, then put back as it was, also on
// the signals above. One lives at a time (the handlers keep one saved mode).
class RawTerminal {
 public:
  explicit RawTerminal(int fd);
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  ~RawTerminal();

 private:
  void restore_handlers();

  int fd_;
  std::optional<termios> saved_;
  std::array<struct sigaction, 4> previous_{};  // the handlers before ours, put back after
};

// SIGWINCH as a readable pipe while this lives; read_fd() is -1 where no pipe could be made.
class WindowChanges {
 public:
  WindowChanges();
  WindowChanges(const WindowChanges&) = delete;
  WindowChanges& operator=(const WindowChanges&) = delete;
  ~WindowChanges();
  int read_fd() const { return read_fd_; }
  // Empties the pipe; true if the window changed since the last call.
  bool take();

 private:
  int read_fd_ = -1;
};

}  // namespace tmpi::launch
