// A connection process: one connection of mpi-sshd, from its key exchange to the end of its
// last command, alone in a process forked by the listener (listener.cpp) before its client
// came. It forks again at once: the parent stays the connection's monitor (monitor.cpp), the
// child is the session process this file serves, which arms the catch of the login's
// signature, locks itself in its sandbox (sandbox.h), and only then waits for the listener
// to send it its client's socket.
//
// Why a process per connection: libssh polls every session that shares an ssh_event when it
// polls for one, and a failure or a disconnect seen there marks the session it was polling for
// (libssh 0.10 src/poll.c, ssh_poll_ctx_dopoll; src/session.c). With one loop for all, a
// stranger's "connect, read the banner, close" ended others' key exchanges and hung up
// logged-in sessions' commands. Here the process's ssh_event holds one session, its
// commands' pipes and its own signals; no other connection's bytes, failure or end can
// reach it. A crash ends one connection, as in OpenSSH's sshd-session.
//
// The loop: poll (at least every 100 ms, for the timers), then signals (SIGCHLD: a command
// ended; SIGTERM, SIGINT: the server stops; SIGUSR1: the listener drops this connection for
// a newer one, which a connection that has logged in ignores), the connection's turn, and the
// channels whose connection has gone. It tells the listener when the client's banner came
// and when it logged in, and forwards its refusals to the listener's rate-limited log. It
// exits once the connection is over and every command's group has ended; its exit status
// says how it ended (server_state.h, exit_status_of), which the listener turns into a penalty.
#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/fd_passing.h"
#include "nodessh/sandbox.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

constexpr int kTickMs = 100;
constexpr int kDidNotStart = 6;

void report_once(const Server::State& server, bool& told, char kind) {
  if (!std::exchange(told, true)) report_to_listener(server, kind);
}

// SIGUSR1 from the listener: a connection not logged in goes for a newer one.
void drop_for_newer(Connection& connection) {
  if (connection.gate.authenticated()) return;
  connection.close_for("dropped",
                       "dropped for a newer connection: the most --sshd-max-startups allows "
                       "are not logged in, and this one was the oldest idle");
}

void begin_stop(Server::State& state, int sig) {
  if (state.stopping) return;
  state.stopping = true;
  if (state.connection) state.connection->close_for("stopping", "the server is stopping");
  spdlog::debug("signal {}: this connection's commands are hung up", sig);
}

void read_signals(Server::State& state) {
  signalfd_siginfo info{};
  while (read(state.signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT)
      begin_stop(state, static_cast<int>(info.ssi_signo));
    Connection* connection = state.connection.get();
    if (info.ssi_signo == SIGUSR1 && connection != nullptr) drop_for_newer(*connection);
  }
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    auto found = state.by_pid.find(pid);
    if (found == state.by_pid.end()) continue;
    Channel* channel = found->second;
    state.by_pid.erase(found);
    command_exited(*channel, status);
  }
}

// What the monitor told: a command's exit, a group gone. A monitor that has gone leaves no
// command to wait for, and no way to start one: the connection ends.
void take_monitor_news(Server::State& state) {
  MonitorLink& link = state.monitor;
  if (!link.monitored) return;
  if (state.monitor_watch) state.monitor_watch->take_ready();
  link.receive(false);  // up to 64 KiB, thousands of answers; more keeps the socket ready
  for (MonitorMessage& message : std::exchange(link.backlog, {})) {
    if (const auto* exited = std::get_if<Exited>(&message)) {
      auto found = state.by_pid.find(exited->pid);
      if (found == state.by_pid.end()) continue;
      Channel* channel = found->second;
      state.by_pid.erase(found);
      command_exited(*channel, exited->status);
    } else if (const auto* gone = std::get_if<GroupGone>(&message)) {
      link.live_groups.erase(gone->pid);
    }
  }
  if (link.fd < 0) {
    state.monitor_watch.reset();
    link.live_groups.clear();
    if (state.connection) state.connection->close_for("monitor", "the connection's monitor has gone");
  }
}

void forget(Server::State& state, const Channel& channel) {
  auto found = state.by_pid.find(channel.command.pid);
  if (found != state.by_pid.end() && found->second == &channel) state.by_pid.erase(found);
}

// The deadlines before login: the client's banner, then the login itself.
void check_deadlines(Server::State& state, Connection& connection, Clock::time_point accepted_at,
                     Clock::time_point now) {
  if (!connection.drop.empty()) return;
  if (!connection.banner_told && ssh_get_clientbanner(connection.session) != nullptr) {
    report_once(state, connection.banner_told, kReportBanner);
  }
  if (!connection.banner_told && now - accepted_at >= kBannerGrace) {
    connection.close_for("banner grace",
                         fmt::format("no client banner within {} s", kBannerGrace.count() / 1000));
  } else if (connection.gate.expired(now)) {
    connection.close_for("login grace",
                         fmt::format("not logged in within {} s", state.options.login_grace.count() / 1000));
  }
}

// How the connection ended, from what it did before its end.
Ending how_it_ended(const Connection& connection) {
  if (connection.gate.authenticated()) return Ending::kLoggedIn;
  if (connection.drop_reason == "login grace" || connection.drop_reason == "banner grace")
    return Ending::kGraceExceeded;
  return connection.gate.attempted() ? Ending::kAuthFailed : Ending::kNoAuth;
}

// The connection's turn; false once it is over and freed.
bool serve_connection(Server::State& state, Connection& connection, Clock::time_point accepted_at,
                      Clock::time_point now, Ending& ending) {
  if (!connection.key_exchanged && connection.drop.empty()) {
    int rc = ssh_handle_key_exchange(connection.session);
    if (rc == SSH_OK) connection.key_exchanged = true;
    if (rc == SSH_ERROR)
      connection.close_for("key exchange",
                           fmt::format("the key exchange failed: {}", ssh_get_error(connection.session)));
  }
  check_deadlines(state, connection, accepted_at, now);
  if (connection.gate.authenticated()) report_once(state, connection.login_told, kReportLogin);
  const int status = ssh_get_status(connection.session);
  bool closed = (status & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0 || ssh_is_connected(connection.session) == 0;
  for (std::size_t i = 0; i < connection.channels.size(); ++i) pump_channel(*connection.channels[i], now);
  auto& channels = connection.channels;
  for (auto it = channels.begin(); it != channels.end();) {
    Channel& channel = **it;
    if (!retire_channel(channel) && !channel.released) {
      ++it;
      continue;
    }
    if (channel.rules.finished()) {
      forget(state, channel);
    } else {
      channel.connection = nullptr;
      state.orphans.push_back(std::move(*it));
    }
    it = channels.erase(it);
  }
  if (!closed && connection.drop.empty()) return true;
  ending = how_it_ended(connection);
  if (!connection.drop.empty()) {
    std::string line = fmt::format("{}: closed: {}", connection.peer, connection.drop);
    if (connection.gate.authenticated()) {
      spdlog::info("{}", line);
    } else {  // a stranger's connections come at line rate
      log_refusal(state, "closed: " + connection.drop_reason, line);
    }
  }
  connection_gone(connection, now);
  for (auto& channel : channels) {
    if (channel->rules.finished()) {
      forget(state, *channel);
    } else {
      state.orphans.push_back(std::move(channel));
    }
  }
  channels.clear();
  if (connection.in_event) ssh_event_remove_session(state.event, connection.session);
  ssh_disconnect(connection.session);
  ssh_free(connection.session);
  return false;
}

void serve_orphans(Server::State& state, Clock::time_point now) {
  auto& orphans = state.orphans;
  for (auto it = orphans.begin(); it != orphans.end();) {
    pump_channel(**it, now);
    if ((*it)->rules.finished()) {
      forget(state, **it);
      it = orphans.erase(it);
    } else {
      ++it;
    }
  }
}

// The process's own signals, in its own signalfd: the listener's is the listener's.
bool watch_own_signals(Server::State& state) {
  if (state.signal_fd >= 0) close(state.signal_fd);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, sig);
  state.signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  state.event = ssh_event_new();
  if (state.signal_fd < 0 || state.event == nullptr) return false;
  state.signal_watch = std::make_unique<Watch>(state.event, state.signal_fd);
  state.signal_watch->want(POLLIN);
  return true;
}

// The fork into the monitor (the parent, which never returns from here) and the session
// process (the child, which goes on to the client's connection), before a byte is read.
bool split_off_monitor(Server::State& state, int handoff) {
  int link[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) != 0) return false;
  // The session process's report lines go to the monitor, which passes them on to the
  // listener but for a login: that one the monitor says, once it has verified it, so that a
  // session process taken over cannot leave the caps on connections not logged in.
  int lines[2];
  if (pipe2(lines, O_CLOEXEC) != 0) {
    close(link[0]);
    close(link[1]);
    return false;
  }
  const pid_t session = fork();
  if (session < 0) return false;
  if (session > 0) {
    close(link[1]);
    close(lines[1]);
    close(handoff);  // no client's socket ever reaches the monitor
    run_monitor(state, link[0], session, lines[0]);
  }
  close(link[0]);
  close(lines[0]);
  if (state.report_fd >= 0) close(state.report_fd);
  state.report_fd = lines[1];
  state.monitor.fd = link[1];
  state.monitor.monitored = true;
  state.monitor_watch = std::make_unique<Watch>(state.event, link[1]);
  state.monitor_watch->want(POLLIN);
  arm_login_capture();
  // Before the client's first byte: from here this process cannot run a program, open a file
  // or a socket, or reach another process (sandbox.h). Without the sandbox, no session.
  Status sandboxed = make_error(Exit::kSoftware, "no seccomp filter was built");
  if (state.session_filter) sandboxed = state.session_filter->enter();
  if (!sandboxed) {
    spdlog::error("the session process's sandbox: {}", sandboxed.error().message);
    return false;
  }
  if (probe_session_sandbox()) {  // and, as a session process taken over would, a command
    Command command;
    command.argv = {"/bin/true"};
    auto started = start_through_monitor(state, command, TerminalSize{});
    if (started)
      spdlog::error("sandbox probe: a command before login went through");
    else
      spdlog::warn("sandbox probe: a command before login refused: {}", started.error().message);
  }
  return true;
}

// A spare's wait for its client: the socket the listener accepted and its peer's address, sent
// with SCM_RIGHTS on the handoff socket. False when the listener has gone (the socket's end)
// or the server stops first: the spare then ends, leaving nothing behind. A SIGUSR1 read here
// (the listener dropping the connection it has just sent, before this process took it) is
// kept in `dropped`, for the connection once it exists.
bool wait_for_client(Server::State& state, int handoff, int& fd, sockaddr_storage& client, bool& dropped) {
  while (true) {
    pollfd fds[2] = {{handoff, POLLIN, 0}, {state.signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return false;
    signalfd_siginfo info{};
    while (read(state.signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) return false;
      if (info.ssi_signo == SIGUSR1) dropped = true;
    }
    if (fds[0].revents == 0) continue;
    Received got = receive_with_fds(handoff, &client, sizeof client, 0);
    if (got.bytes < 0 && errno == EINTR) continue;
    if (got.fds.size() == 1 && !got.truncated) {
      fd = got.fds.front();
    } else {
      for (int other : got.fds) close(other);  // one socket is all a spare takes
    }
    close(handoff);
    if (fd >= 0 && got.bytes == static_cast<ssize_t>(sizeof client)) return true;
    if (fd >= 0) close(fd);
    return false;
  }
}

}  // namespace

bool serve_turn(Server::State& state, Clock::time_point accepted_at, Clock::time_point now, Ending& ending) {
  if (state.signal_watch && state.signal_watch->take_ready() != 0) read_signals(state);
  take_monitor_news(state);
  if (state.connection && !serve_connection(state, *state.connection, accepted_at, now, ending)) {
    state.connection.reset();
  }
  serve_orphans(state, now);
  return state.connection || !state.orphans.empty();
}

void serve_connection_process(Server::State& state, int handoff) {
  setrlimit(RLIMIT_NOFILE, &state.descriptors_at_start);  // a command gets what the server got
  if (!watch_own_signals(state) || !split_off_monitor(state, handoff)) _exit(kDidNotStart);
  // The session process, in its sandbox: the client's socket comes only now.
  int fd = -1;
  sockaddr_storage client{};
  bool dropped = false;
  if (!wait_for_client(state, handoff, fd, client, dropped)) _exit(kDidNotStart);
  const auto accepted_at = Clock::now();
  if (!start_session(state, fd, client, describe_peer(client), accepted_at)) _exit(kDidNotStart);
  if (dropped) drop_for_newer(*state.connection);
  Ending ending = Ending::kNoAuth;
  do {
    ssh_event_dopoll(state.event, kTickMs);
  } while (serve_turn(state, accepted_at, Clock::now(), ending));
  spdlog::default_logger()->flush();
  _exit(exit_status_of(ending));
}

int exit_status_of(Ending ending) {
  switch (ending) {
    case Ending::kLoggedIn:
      return 0;
    case Ending::kAuthFailed:
      return 2;
    case Ending::kGraceExceeded:
      return 3;
    case Ending::kCrashed:
      return 4;
    case Ending::kNoAuth:
      return 5;
  }
  return 5;
}

Ending ending_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    // As sshd.c's signal_is_crash: the signals of a fault, not of someone ending it.
    const bool crash = sig == SIGSEGV || sig == SIGBUS || sig == SIGTRAP || sig == SIGSYS || sig == SIGFPE ||
                       sig == SIGILL || sig == SIGABRT;
    return crash ? Ending::kCrashed : Ending::kNoAuth;
  }
  switch (WEXITSTATUS(wait_status)) {
    case 0:
      return Ending::kLoggedIn;
    case 2:
      return Ending::kAuthFailed;
    case 3:
      return Ending::kGraceExceeded;
    case 4:
      return Ending::kCrashed;
    default:
      return Ending::kNoAuth;
  }
}

void report_to_listener(const Server::State& server, char kind, const std::string& text) {
  if (server.report_fd < 0) return;
  std::string line(1, kind);
  line += text.substr(0, 1000);
  for (char& c : line) c = c == '\n' ? ' ' : c;
  line += '\n';
  // One write of under PIPE_BUF is whole or nothing; a full pipe drops a refusal's line
  // rather than stall the connection.
  [[maybe_unused]] ssize_t wrote = write(server.report_fd, line.data(), line.size());
}

void log_refusal(Server::State& server, const std::string& reason, const std::string& line) {
  if (server.report_fd >= 0) {
    report_to_listener(server, kReportRefusal, reason + '\t' + line);
  } else if (auto told = server.refusals.note(reason, line, Clock::now())) {
    spdlog::warn("{}", *told);
  }
}

}  // namespace tmpi::nodessh
