// A connection's monitor (the session process's side of their link: monitor_link.cpp; its frames:
// monitor_protocol.h).
//
// The connection process forks before it reads a byte of its client: the parent stays the
// monitor, the child becomes the session process, which runs libssh's session (the key
// exchange, the login, the channels) and cannot start a process of its own. OpenSSH's sshd
// splits the same way (monitor.c and sshd-session's unprivileged child); unlike it, the
// session process keeps the channels after login, because libssh cannot hand a session to
// another process. So every command goes through the monitor: the session process asks
// (StartRequest), the monitor forks it as command.cpp does and passes its descriptors back
// (SCM_RIGHTS); the monitor reaps it (Exited), tells when its group is gone (GroupGone), and
// sends the signals the session process asks for, to the groups of its own commands only.
//
// The monitor holds no client byte: not the socket, not libssh's session. It ends with its
// session process, and takes that process's exit status as its own (the listener's penalty
// reads it). A session process that ends while commands still run (a crash) has them hung up
// (SIGHUP and SIGCONT, SIGKILL after --sshd-hangup-grace), as a client that went would.
#include <poll.h>
#include <sodium.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>

#include <spdlog/spdlog.h>

#include "common/fd_passing.h"
#include "nodessh/login_proof.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

bool send_frame(int fd, const std::string& frame, const std::vector<int>& fds) {
  std::size_t sent = 0;
  while (sent < frame.size()) {
    // The descriptors ride with the frame's first byte (common/fd_passing.h).
    const std::span<const int> riding = sent == 0 ? std::span<const int>(fds) : std::span<const int>();
    ssize_t wrote = send_with_fds(fd, frame.data() + sent, frame.size() - sent, riding, MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    sent += static_cast<std::size_t>(wrote);
  }
  return true;
}

// --- The monitor ---

namespace {

struct Monitor {
  Monitor(Server::State& owner, int link_fd, pid_t session_pid)
      : state(owner), link(link_fd), session(session_pid) {}
  Server::State& state;
  std::optional<LoginVerifier> verifier;  // none: the job key's type is one it cannot check
  std::optional<std::string> logged_in;   // the user, once the monitor has verified the login
  int link;
  pid_t session;
  MonitorDecoder decoder{MonitorDecoder::Side::kMonitor};
  std::set<pid_t> running;  // started, not yet reaped
  std::set<pid_t> groups;   // started, group not yet seen gone
  std::optional<int> session_status;
  std::optional<Clock::time_point> hung_up_at;

  void answer(const MonitorMessage& message, const std::vector<int>& fds = {}) {
    if (link >= 0 && !send_frame(link, encode_monitor_message(message), fds)) close_link();
  }
  void close_link() {
    if (link >= 0) close(link);
    link = -1;
  }

  void start(const StartRequest& request) {
    if (!logged_in) {  // a session process taken over before login asks for a command
      spdlog::warn("a command asked for before the monitor verified a login: refused");
      answer(StartFailed{request.channel, "not logged in"});
      return;
    }
    auto started = start_command(request.command, state.base_env, request.size);
    if (!started) {
      answer(StartFailed{request.channel, started.error().message});
      return;
    }
    running.insert(started->pid);
    groups.insert(started->pid);
    std::vector<int> fds{started->stdin_fd};
    if (!request.command.pty) fds.insert(fds.end(), {started->stdout_fd, started->stderr_fd});
    answer(Started{request.channel, started->pid, request.command.pty}, fds);
    for (int fd : fds) close(fd);
  }

  void login(const LoginRequest& request) {
    Expected<std::string> user = make_error(Exit::kData, "the job key's type cannot be verified here");
    if (logged_in)
      user = make_error(Exit::kData, "a second login on one connection");
    else if (verifier)
      user = verifier->check(request.signed_blob, request.signature);
    if (user) {
      logged_in = *user;
      report_to_listener(state, kReportLogin);
    }
    answer(LoginVerdict{static_cast<bool>(user), user ? "" : user.error().message});
  }

  void take(MonitorMessage message) {
    if (auto* request = std::get_if<StartRequest>(&message)) start(*request);
    if (auto* request = std::get_if<LoginRequest>(&message)) login(*request);
    if (auto* signal = std::get_if<SignalRequest>(&message);
        signal != nullptr && groups.contains(signal->pid))
      kill(-signal->pid, signal->signal);
  }

  void read_link() {
    char buffer[65536];
    ssize_t got = read(link, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0 || !decoder.feed(std::string_view(buffer, static_cast<std::size_t>(got)))) {
      close_link();
      return;
    }
    while (auto next = decoder.next()) take(std::move(*next));
  }

  // The session process's report lines, passed on whole, but for a login's (the monitor's own
  // to say) and a line past the pipe's whole-write bound.
  int session_lines = -1;
  std::string pending_line;
  void read_session_lines() {
    char buffer[4096];
    ssize_t got = read(session_lines, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) {
      close(session_lines);
      session_lines = -1;
      return;
    }
    pending_line.append(buffer, static_cast<std::size_t>(got));
    std::size_t end = 0;
    while ((end = pending_line.find('\n')) != std::string::npos) {
      std::string line = pending_line.substr(0, end);
      pending_line.erase(0, end + 1);
      if (!line.empty() && line[0] != kReportLogin) report_to_listener(state, line[0], line.substr(1));
    }
    if (pending_line.size() > 2048) pending_line.clear();
  }

  void read_signals() {
    signalfd_siginfo info{};
    while (read(state.signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo != SIGCHLD && !session_status) kill(session, static_cast<int>(info.ssi_signo));
    }
    int status = 0;
    pid_t pid = 0;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid == session) session_status = status;
      if (running.erase(pid) != 0) answer(Exited{pid, status});
    }
  }

  void check_groups() {
    for (auto it = groups.begin(); it != groups.end();) {
      if (running.contains(*it) || group_alive(*it)) {
        ++it;
        continue;
      }
      answer(GroupGone{*it});
      it = groups.erase(it);
    }
  }

  // Once the session process has ended: what it left running is hung up, then killed.
  bool finished(Clock::time_point now) {
    if (!session_status) return false;
    if (groups.empty()) return true;
    if (!hung_up_at) {
      hung_up_at = now;
      for (pid_t group : groups) kill(-group, SIGHUP), kill(-group, SIGCONT);
      spdlog::warn("the connection's session process ended with {} command group(s) left; SIGHUP",
                   groups.size());
    } else if (now - *hung_up_at >= state.options.hangup_grace) {
      for (pid_t group : groups) kill(-group, SIGKILL);
      return true;
    }
    return false;
  }
};

}  // namespace

void prepare_login_verifier(Server::State& state) {
  // The job key's wire blob: libssh 0.10 exports it only as base64 (ssh_pki_export_pubkey_blob
  // is not public there).
  char* base64 = nullptr;
  std::string key_blob(8192, '\0');
  std::size_t blob_size = 0;
  if (ssh_pki_export_pubkey_base64(state.job_public, &base64) == SSH_OK &&
      sodium_base642bin(reinterpret_cast<unsigned char*>(key_blob.data()), key_blob.size(), base64,
                        std::strlen(base64), nullptr, &blob_size, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) == 0) {
    key_blob.resize(blob_size);
    auto verifier = LoginVerifier::for_job_key(key_blob);
    if (verifier) {
      state.login_verifier = std::move(*verifier);
    } else {
      spdlog::error("{}: no login can be verified, so none is taken", verifier.error().message);
    }
  }
  ssh_string_free_char(base64);
}

void run_monitor(Server::State& state, int link, pid_t session, int session_lines) {
  Monitor monitor(state, link, session);
  monitor.session_lines = session_lines;
  monitor.verifier = state.login_verifier;  // made once by the listener; the seen ids are this monitor's
  while (true) {
    pollfd fds[3] = {
        {state.signal_fd, POLLIN, 0}, {monitor.link, POLLIN, 0}, {monitor.session_lines, POLLIN, 0}};
    // A descriptor of -1 is left out by poll itself. With no command (a spare, or a session
    // before its first) nothing is timed here: it sleeps until a signal or its session speaks.
    poll(fds, 3, monitor.groups.empty() && !monitor.session_status ? -1 : 100);
    monitor.read_signals();
    if (monitor.link >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) monitor.read_link();
    if (monitor.session_lines >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) != 0)
      monitor.read_session_lines();
    monitor.check_groups();
    if (monitor.finished(Clock::now())) break;
  }
  spdlog::default_logger()->flush();
  while (monitor.session_lines >= 0) monitor.read_session_lines();  // its last lines, to their end
  // A session process that says it logged in where the monitor verified no login: a failed one.
  Ending ending = ending_of(*monitor.session_status);
  if (ending == Ending::kLoggedIn && !monitor.logged_in) ending = Ending::kAuthFailed;
  _exit(exit_status_of(ending));
}

}  // namespace tmpi::nodessh
