// mpi-ssh-client: ssh for MPI's daemons where OpenSSH's client cannot run (ssh/client.h says
// where and why). mpi-ssh execs it with MPI's own arguments; it connects, runs the command
// with its stdin, stdout and stderr (ssh/channel.h), and exits with the command's status, or
// 255 with one line on stderr, as ssh does. MPI's teardown kills it: its connection closes,
// and the server ends the command, as it would under a killed ssh. A person's `ssh HOST` or
// `ssh -t HOST CMD` in `mpi-launcher shell` gets a login shell or the command on a pty, this
// terminal raw meanwhile (ssh/terminal.h).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/log.h"
#include "ssh/call.h"
#include "ssh/channel.h"
#include "ssh/client.h"
#include "ssh/terminal.h"

namespace {

// The connection's and the login's bound: the ssh check's own (launcher/run_steps.cpp), where
// OpenSSH's client, run with -F /dev/null, would wait for the kernel's.
constexpr tmpi::Millis kConnectTimeout{10000};

// One line on stderr, which MPI shows: what the server or libssh said is outside text, its
// control characters and invalid UTF-8 escaped as the launcher's log escapes them.
int fail(const std::string& host, const std::string& why) {
  std::string line = tmpi::log::printable(fmt::format("{}: {}", host.empty() ? "(no host)" : host, why));
  std::fprintf(stderr, "mpi-ssh-client: %s\n", line.c_str());
  return 255;
}

int run(const std::vector<std::string>& args) {
  using namespace tmpi::launch;
  SshCall call = parse_ssh_call(args);
  if (auto why = client_cannot_serve(call)) return fail(call.host, "cannot run this as ssh would: " + *why);
  bool stdin_open = !call.no_stdin && fcntl(0, F_GETFD) >= 0;
  TerminalChoice terminal = choose_terminal(call, stdin_open && isatty(0) == 1);
  if (!terminal.notice.empty()) std::fprintf(stderr, "%s\n", terminal.notice.c_str());
  auto session = open_client_session(call, kConnectTimeout);
  if (!session) return fail(call.host, session.error().message);
  RemoteCall remote;  // no caller socket and no wake: the client is its own caller
  remote.command = call.command;
  remote.in = stdin_open ? 0 : open("/dev/null", O_RDONLY | O_CLOEXEC);
  remote.out = 1;
  remote.err = 2;
  std::optional<WindowChanges> window;
  std::optional<RawTerminal> raw;
  if (terminal.pty) {
    remote.window = &window.emplace();  // first: a resize from now on is seen
    remote.pty = terminal_size(remote.in);
    raw.emplace(remote.in);
  }
  std::atomic<bool> stop{false};
  RemoteExit ended = run_remote(session->get(), remote, stop);
  raw.reset();  // the terminal as it was, before any word of ours
  if (terminal.pty && !call.quiet) std::fprintf(stderr, "Connection to %s closed.\r\n", call.host.c_str());
  if (!ended.problem.empty()) fail(call.host, ended.problem);
  return ended.status;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a reader gone is a write error, handled where it happens
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {  // ssh's own is -V, which this passes on
    std::printf("mpi-ssh-client %s\n", TMPI_VERSION);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--help") {
    std::printf(
        "mpi-ssh-client [ssh options] HOST [COMMAND...]   (run by mpi-ssh where ssh cannot run)\n"
        "Runs COMMAND on HOST over a libssh session of its own: -p, -l, -i, -o UserKnownHostsFile\n"
        "with -o StrictHostKeyChecking=yes; it needs no passwd entry for the running uid. No\n"
        "COMMAND: a login shell. A pty as ssh gives one (-t, -tt, -T); no escape character.\n");
    return 0;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    return fail("", e.what());
  }
}
