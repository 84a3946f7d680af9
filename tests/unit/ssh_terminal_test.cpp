// mpi-ssh-client's terminal (ssh/terminal.h): when a session gets a pty, as OpenSSH's ssh.c
// decides it, and that this side's terminal is raw while the session lives and as it was
// after, on a real pty pair, also when a signal ends the client. The login itself, typed
// into a pty, is the cluster test's (cluster.nodessh: `ssh HOST` in `mpi-launcher shell` as
// a uid with no passwd entry).
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <gtest/gtest.h>

#include "ssh/terminal.h"

namespace tmpi::launch {
namespace {

TEST(SshTerminal, GivesAPtyWhereSshWould) {
  struct Case {
    std::vector<std::string> args;
    bool stdin_is_terminal;
    bool pty;
    bool notice;
  };
  const std::vector<Case> cases = {
      {{"node"}, true, true, false},               // a login at a terminal
      {{"node"}, false, false, true},              // a login fed from a pipe: a shell reading it
      {{"-q", "node"}, false, false, false},       // ... quietly
      {{"-T", "node"}, true, false, false},        // no pty asked
      {{"node", "top"}, true, false, false},       // a command: none unless -t
      {{"-t", "node", "top"}, true, true, false},  // -t at a terminal
      {{"-t", "node", "top"}, false, false, true},
      {{"-tt", "node", "top"}, false, true, false},       // forced
      {{"-ttt", "node", "top"}, false, false, true},      // a third -t asks again, as in ssh.c
      {{"-t", "-T", "node", "top"}, true, false, false},  // the last of -t and -T counts
      {{"-T", "-t", "node", "top"}, true, true, false},
      {{"-n", "node"}, true, false, true},  // stdin is /dev/null
  };
  for (const Case& c : cases) {
    TerminalChoice choice = choose_terminal(parse_ssh_call(c.args), c.stdin_is_terminal);
    EXPECT_EQ(choice.pty, c.pty) << ::testing::PrintToString(c.args);
    EXPECT_EQ(!choice.notice.empty(), c.notice) << ::testing::PrintToString(c.args);
  }
}

void a_handler_of_its_own(int /*signal*/) {}

void (*handler_of(int signal_number))(int) {
  struct sigaction now {};
  sigaction(signal_number, nullptr, &now);
  return now.sa_handler;
}

TEST(SshTerminal, IsRawForTheSessionAndAsItWasAfter) {
  int master = -1, slave = -1;
  winsize size{};
  size.ws_row = 33;
  size.ws_col = 101;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &size), 0);
  termios before{};
  ASSERT_EQ(tcgetattr(slave, &before), 0);
  ASSERT_NE(before.c_lflag & ECHO, 0U);
  // SIGTERM handled by a handler of the program's own before: ours while raw, its after.
  struct sigaction own {
  }, found_before{};
  own.sa_handler = &a_handler_of_its_own;
  sigemptyset(&own.sa_mask);
  sigaction(SIGTERM, &own, &found_before);
  {
    RawTerminal raw(slave);
    EXPECT_NE(handler_of(SIGTERM), &a_handler_of_its_own) << "no handler of ours while raw";
    termios during{};
    ASSERT_EQ(tcgetattr(slave, &during), 0);
    EXPECT_EQ(during.c_lflag & (ECHO | ICANON | ISIG), 0U);
    EXPECT_EQ(during.c_oflag & OPOST, 0U);
    EXPECT_EQ(during.c_iflag & ICRNL, 0U);
  }
  termios after{};
  ASSERT_EQ(tcgetattr(slave, &after), 0);
  EXPECT_EQ(after.c_lflag, before.c_lflag);
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_EQ(after.c_oflag, before.c_oflag);
  EXPECT_EQ(handler_of(SIGTERM), &a_handler_of_its_own) << "the program's handler, put back";
  PtyRequest request = terminal_size(slave);
  EXPECT_EQ(request.cols, 101);
  EXPECT_EQ(request.rows, 33);
  EXPECT_EQ(terminal_size(-1).cols, 80);  // no terminal: this client's 80x24
  {
    RawTerminal not_a_terminal(-1);  // nothing to make raw, nothing to put back, no handler
    EXPECT_EQ(handler_of(SIGTERM), &a_handler_of_its_own);
  }
  sigaction(SIGTERM, &found_before, nullptr);
  close(slave);
  close(master);
}

// A client in raw mode, in a child: it says so on `ready`, then waits for its end. With
// `ignore_hangup`, SIGHUP was ignored before (nohup), as the client found it.
pid_t raw_client(int terminal, bool ignore_hangup, int ready) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  sigset_t none;  // every signal deliverable, whatever a test before this one blocked
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int signal_number : {SIGHUP, SIGINT, SIGQUIT, SIGTERM}) signal(signal_number, SIG_DFL);
  rlimit no_core{0, 0};  // SIGQUIT's default action dumps core
  setrlimit(RLIMIT_CORE, &no_core);
  if (ignore_hangup) signal(SIGHUP, SIG_IGN);
  RawTerminal raw(terminal);
  char byte = 1;
  if (write(ready, &byte, 1) != 1) _exit(3);
  for (;;) pause();
}

// The child's end within 10 s, else SIGKILL: a client that no signal ends fails the test
// rather than hang it.
int ended_within_10s(pid_t child) {
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    if (waitpid(child, &status, WNOHANG) == child) return status;
    usleep(10 * 1000);
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  ADD_FAILURE() << "the client did not end within 10 s";
  return status;
}

bool is_raw(int terminal) {
  termios mode{};
  return tcgetattr(terminal, &mode) == 0 && (mode.c_lflag & (ECHO | ICANON)) == 0;
}

TEST(SshTerminal, IsPutBackWhenASignalEndsTheClient) {
  for (int signal_number : {SIGTERM, SIGHUP, SIGINT, SIGQUIT}) {
    int master = -1, slave = -1, ready[2];
    ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
    ASSERT_EQ(pipe(ready), 0);
    termios before{};
    ASSERT_EQ(tcgetattr(slave, &before), 0);
    pid_t client = raw_client(slave, signal_number == SIGQUIT, ready[1]);
    ASSERT_GT(client, 0);
    pollfd said{ready[0], POLLIN, 0};
    char byte = 0;
    ASSERT_TRUE(poll(&said, 1, 10000) == 1 && read(ready[0], &byte, 1) == 1) << "the child never got raw";
    EXPECT_TRUE(is_raw(slave));
    if (signal_number == SIGQUIT) {  // SIGHUP ignored: it stays so, and the client raw
      kill(client, SIGHUP);
      usleep(100 * 1000);
      EXPECT_EQ(waitpid(client, nullptr, WNOHANG), 0) << "an ignored SIGHUP ended the client";
      EXPECT_TRUE(is_raw(slave));
    }
    kill(client, signal_number);
    int status = ended_within_10s(client);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number)  // ended by it, as before
        << strsignal(signal_number) << ": status " << status;
    termios after{};
    ASSERT_EQ(tcgetattr(slave, &after), 0);
    EXPECT_EQ(after.c_lflag, before.c_lflag) << strsignal(signal_number);
    EXPECT_EQ(after.c_iflag, before.c_iflag) << strsignal(signal_number);
    EXPECT_EQ(after.c_oflag, before.c_oflag) << strsignal(signal_number);
    for (int fd : {master, slave, ready[0], ready[1]}) close(fd);
  }
}

TEST(SshTerminal, TellsTheLoopOfAWindowChange) {
  {
    WindowChanges changes;
    ASSERT_GE(changes.read_fd(), 0);
    EXPECT_FALSE(changes.take());
    raise(SIGWINCH);
    raise(SIGWINCH);
    EXPECT_TRUE(changes.take());
    EXPECT_FALSE(changes.take());
  }
  struct sigaction now {};
  sigaction(SIGWINCH, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // the handler goes with the pipe
}

}  // namespace
}  // namespace tmpi::launch
