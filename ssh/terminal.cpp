// See ssh/terminal.h. The signal handlers do only what a handler may: a write(2) to a
// non-blocking pipe (a window change), or tcsetattr(3) and a raise of the signal at its
// default action (the end of the client); everything else happens in the session's loop.
#include "ssh/terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

namespace tmpi::launch {

namespace {

// The write end of the live WindowChanges' pipe, for the handler; -1 while none lives.
volatile sig_atomic_t window_pipe = -1;

void on_window_change(int /*signal*/) {
  int saved = errno;
  int fd = window_pipe;
  if (fd >= 0) {
    char byte = 1;
    [[maybe_unused]] ssize_t ignored = write(fd, &byte, 1);  // a full pipe already says it changed
  }
  errno = saved;
}

// The signals that end the client with its terminal put back first.
constexpr std::array<int, 4> kEndingSignals = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};

// The live RawTerminal's fd and saved mode, for the handler; -1 while none is raw.
volatile sig_atomic_t raw_fd = -1;
termios raw_saved{};

void on_ending_signal(int signal_number) {
  int fd = raw_fd;
  // At once (TCSANOW): waiting for output to drain could wait for good on a terminal that
  // nobody reads, and the signal would then end nothing.
  if (fd >= 0) tcsetattr(fd, TCSANOW, &raw_saved);
  std::signal(signal_number, SIG_DFL);  // then end as the signal would have ended us
  raise(signal_number);
}

}  // namespace

TerminalChoice choose_terminal(const SshCall& call, bool stdin_is_terminal) {
  TerminalChoice choice;
  bool wanted = !call.no_tty && (call.tty_requests > 0 || call.command.empty());
  bool forced = call.tty_requests >= 2;
  if (wanted && !forced && (!stdin_is_terminal || call.no_stdin)) {
    if (!call.quiet) choice.notice = "Pseudo-terminal will not be allocated because stdin is not a terminal.";
    return choice;
  }
  choice.pty = wanted;
  return choice;
}

PtyRequest terminal_size(int fd) {
  PtyRequest request;
  const char* term = std::getenv("TERM");
  request.term = term != nullptr ? term : "";
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
    request.cols = size.ws_col;
    request.rows = size.ws_row;
  }
  return request;
}

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  termios mode{};
  if (tcgetattr(fd_, &mode) != 0) return;  // not a terminal: nothing to put back
  saved_ = mode;
  mode.c_iflag |= IGNPAR;
  mode.c_iflag &= ~static_cast<tcflag_t>(ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXANY | IXOFF | IUCLC);
  mode.c_lflag &= ~static_cast<tcflag_t>(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
  mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  mode.c_cc[VMIN] = 1;
  mode.c_cc[VTIME] = 0;
  raw_saved = *saved_;
  raw_fd = fd_;
  struct sigaction action {};
  action.sa_handler = &on_ending_signal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : kEndingSignals) sigaddset(&action.sa_mask, signal_number);  // one at a time
  for (size_t i = 0; i < kEndingSignals.size(); ++i) {
    sigaction(kEndingSignals[i], nullptr, &previous_[i]);
    // Ignored stays ignored, never handled even for a moment, as clientloop.c leaves it (a
    // client started under nohup, or by a shell in the background).
    if (previous_[i].sa_handler != SIG_IGN) sigaction(kEndingSignals[i], &action, nullptr);
  }
  if (tcsetattr(fd_, TCSADRAIN, &mode) != 0) {
    restore_handlers();
    saved_.reset();
  }
}

RawTerminal::~RawTerminal() {
  if (!saved_) return;
  // The terminal first: a signal between the two finds the handler still there, which puts
  // the same mode back again, where the other order would leave the terminal raw.
  tcsetattr(fd_, TCSADRAIN, &*saved_);
  restore_handlers();
}

void RawTerminal::restore_handlers() {
  for (size_t i = 0; i < kEndingSignals.size(); ++i) sigaction(kEndingSignals[i], &previous_[i], nullptr);
  raw_fd = -1;
}

WindowChanges::WindowChanges() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  read_fd_ = fds[0];
  window_pipe = fds[1];
  struct sigaction action {};
  action.sa_handler = &on_window_change;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGWINCH, &action, nullptr);
}

WindowChanges::~WindowChanges() {
  if (read_fd_ < 0) return;
  signal(SIGWINCH, SIG_DFL);
  int write_fd = window_pipe;
  window_pipe = -1;
  close(write_fd);
  close(read_fd_);
}

bool WindowChanges::take() {
  char buffer[64];
  bool changed = false;
  while (read_fd_ >= 0 && read(read_fd_, buffer, sizeof buffer) > 0) changed = true;
  return changed;
}

}  // namespace tmpi::launch
