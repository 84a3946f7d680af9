// See command.h. Everything the child needs (argv, the whole environment, the words of its one
// error) is built before the fork (common/exec_plan.h); the child only rewires descriptors,
// restores the signal state the server changed (its blocked mask, SIGPIPE ignored), closes
// what it inherited, changes to HOME, and execs. So the fork is a vfork: the child borrows the
// monitor's memory until its exec, and the kernel copies no page table of it (a fork of the
// monitor and its end were about 0.3 ms of a connection's 6 on a shared 2-core VM). Nothing
// the child calls allocates, takes a lock or returns from here; it has its own descriptors
// and signal dispositions (vfork shares only the memory).
#include "nodessh/command.h"

#include <dirent.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utmp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/exec_plan.h"

namespace tmpi::nodessh {

namespace {

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

winsize to_winsize(const TerminalSize& size) {
  winsize out{};
  out.ws_col = static_cast<unsigned short>(size.columns);
  out.ws_row = static_cast<unsigned short>(size.rows);
  out.ws_xpixel = static_cast<unsigned short>(size.width_px);
  out.ws_ypixel = static_cast<unsigned short>(size.height_px);
  return out;
}

// In the child, before exec: async-signal-safe calls only. Every signal as a fresh process
// has it, whatever the server was started with: a server started in the background by a
// script has SIGINT and SIGQUIT ignored, and a command would keep that across exec (a
// person's Ctrl-C at a pty would stop nothing). sshd resets them for each connection too
// (openssh-portable sshd-session.c: SIGALRM, SIGHUP, SIGTERM, SIGQUIT, SIGCHLD, SIGINT;
// session.c, do_child: SIGPIPE).
// The handlers go first and the mask last, as glibc's posix_spawn orders them: a child of
// vfork shares the monitor's memory, and a signal let in before its handler was reset would
// run the monitor's handler there.
void restore_signals() {
  struct sigaction plain {};
  plain.sa_handler = SIG_DFL;
  for (int number = 1; number < NSIG; ++number) {
    // SIGKILL and SIGSTOP cannot be caught; glibc refuses its own two (32, 33): harmless.
    if (number != SIGKILL && number != SIGSTOP) sigaction(number, &plain, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// What the child does after its stdin, stdout and stderr are in place, made before the fork.
struct CleanStart {
  std::string home;
  std::string chdir_failed;  // "Could not chdir to home directory HOME: "
  int max_fd = 1024;         // RLIMIT_NOFILE's soft limit: where the last resort stops

  explicit CleanStart(std::string folder)
      : home(std::move(folder)), chdir_failed("Could not chdir to home directory " + home + ": ") {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      max_fd = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
  }

  // In the child: async-signal-safe calls only.
  void apply() const {
    close_inherited();
    if (chdir(home.c_str()) != 0) {
      const char* why = strerrordesc_np(errno);
      say(chdir_failed.c_str());
      say(why != nullptr ? why : "unknown error");
      say("\n");
      if (chdir("/") != 0) _exit(126);
    }
  }

 private:
  static void say(const char* text) {
    ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
  }

  // Every descriptor above stderr: those the server inherited from whoever started it (a
  // script's `3>file`, a runtime's socket), which carry no close-on-exec, must not reach a
  // command. close_range (Linux 5.9); before it, each one /proc/self/fd lists; without /proc,
  // each one up to the limit.
  void close_inherited() const {
    if (close_range(3, ~0U, 0) == 0) return;
    int folder = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder < 0) {
      for (int fd = 3; fd < max_fd; ++fd) close(fd);
      return;
    }
    alignas(dirent64) char entries[4096];
    ssize_t got = 0;
    while ((got = getdents64(folder, entries, sizeof entries)) > 0) {
      for (ssize_t at = 0; at < got;) {
        const auto* entry = reinterpret_cast<const dirent64*>(entries + at);
        at += entry->d_reclen;
        int fd = 0;
        for (const char* digit = entry->d_name; *digit >= '0' && *digit <= '9'; ++digit)
          fd = fd * 10 + (*digit - '0');
        if (entry->d_name[0] != '.' && fd > STDERR_FILENO && fd != folder) close(fd);
      }
    }
    close(folder);
  }
};

struct Pipes {
  std::array<int, 2> in{-1, -1};
  std::array<int, 2> out{-1, -1};
  std::array<int, 2> err{-1, -1};
  void close_all() {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) close(fd);
    }
  }
};

Expected<StartedCommand> start_with_pipes(const launch::ExecPlan& plan, const CleanStart& clean) {
  Pipes pipes;
  if (pipe2(pipes.in.data(), O_CLOEXEC) != 0 || pipe2(pipes.out.data(), O_CLOEXEC) != 0 ||
      pipe2(pipes.err.data(), O_CLOEXEC) != 0) {
    int error = errno;
    pipes.close_all();
    return make_error(Exit::kOsErr, "cannot make the command's pipes: {}", std::strerror(error));
  }
  pid_t pid = vfork();  // the child only rewires descriptors and execs (above)
  if (pid < 0) {
    int error = errno;
    pipes.close_all();
    return make_error(Exit::kOsErr, "cannot fork the command: {}", std::strerror(error));
  }
  if (pid == 0) {
    restore_signals();
    setsid();
    dup2(pipes.in[0], STDIN_FILENO);
    dup2(pipes.out[1], STDOUT_FILENO);
    dup2(pipes.err[1], STDERR_FILENO);
    clean.apply();
    plan.exec();
  }
  close(pipes.in[0]);
  close(pipes.out[1]);
  close(pipes.err[1]);
  StartedCommand started{pid, pipes.in[1], pipes.out[0], pipes.err[0]};
  for (int fd : {started.stdin_fd, started.stdout_fd, started.stderr_fd}) set_nonblocking(fd);
  return started;
}

Expected<StartedCommand> start_with_pty(const launch::ExecPlan& plan, const CleanStart& clean,
                                        const TerminalSize& size) {
  int master = -1;
  int slave = -1;
  winsize window = to_winsize(size);
  if (openpty(&master, &slave, nullptr, nullptr, &window) != 0) {
    return make_error(Exit::kOsErr, "cannot open a pty: {}", std::strerror(errno));
  }
  fcntl(master, F_SETFD, FD_CLOEXEC);
  pid_t pid = vfork();  // the child only rewires descriptors and execs (above)
  if (pid < 0) {
    int error = errno;
    close(master);
    close(slave);
    return make_error(Exit::kOsErr, "cannot fork the command: {}", std::strerror(error));
  }
  if (pid == 0) {
    restore_signals();
    // login_tty: a new session, the pty as its controlling terminal, and as fds 0, 1, 2.
    if (login_tty(slave) != 0) _exit(126);
    clean.apply();
    plan.exec();
  }
  close(slave);
  set_nonblocking(master);
  return StartedCommand{pid, master, master, -1};
}

}  // namespace

Expected<StartedCommand> start_command(const Command& command, const std::map<std::string, std::string>& base,
                                       const TerminalSize& size) {
  std::map<std::string, std::string> env = base;
  for (const auto& [name, value] : command.env) env[name] = value;
  const launch::ExecPlan plan(command.argv, env);
  auto home = base.find("HOME");
  const CleanStart clean(home != base.end() && !home->second.empty() ? home->second : "/");
  return command.pty ? start_with_pty(plan, clean, size) : start_with_pipes(plan, clean);
}

std::string find_sftp_server() {
  for (std::string_view candidate : kSftpServerPaths) {
    std::string path(candidate);
    struct stat info {};
    if (stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0)
      return path;
  }
  return "";
}

void resize_terminal(int master_fd, const TerminalSize& size) {
  winsize window = to_winsize(size);
  ioctl(master_fd, TIOCSWINSZ, &window);
}

bool group_alive(pid_t pgid) {
  return pgid > 0 && (kill(-pgid, 0) == 0 || errno == EPERM);
}

}  // namespace tmpi::nodessh
