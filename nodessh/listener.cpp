// The listener: mpi-sshd's first process. It owns the listening socket, and nothing of any
// connection: each accepted one goes to a connection process of its own
// (connection_process.cpp), as OpenSSH's sshd forks an sshd-session for each. What it keeps
// of a connection is what the admission needs (admission.h): its address, whether it is idle
// or has logged in (its process tells it on a pipe), and how it ended (its exit status).
//
// A connection process is made before its client: one spare, forked with the host key
// loaded, already split into its monitor and its session process, which has entered its
// sandbox and waits on a socketpair for a client. An admitted socket and its peer's address go
// to it there (SCM_RIGHTS), so a client's key exchange starts at once, and only a process that
// can no longer open, run or signal anything ever holds it. The next spare is made once the
// server is idle (no connection process left), so that it never takes a core from a handshake
// or from the ranks of a job whose daemons' sessions are open; meanwhile each new connection
// gets a spare made for it on the spot, as before. The first connection after a quiet time,
// a launch's, finds one ready. At most one waits, so an idle pod holds two processes more. A
// spare's session process sees its socketpair's end when the listener goes, however it goes,
// and ends, and its monitor with it: nothing is left behind.
//
// The loop: poll the listening socket, the signalfd (SIGCHLD, SIGTERM, SIGINT) and every
// connection process's report pipe, at least every 100 ms for the refusal log's flush. At
// accept the admission decides: admit, admit and drop the oldest idle starting connection
// (SIGUSR1 to its process, which a process that has logged in meanwhile ignores: a session is
// never dropped for a newcomer), or refuse (closed at once, named in the rate-limited log).
// On SIGTERM or SIGINT it stops accepting, passes the signal to every connection process (each
// hangs up its commands), and returns once all have ended. It reaps any child, so as a
// container's PID 1 it also reaps the orphans that commands leave.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/fd_passing.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

Expected<int> listen_on(SshdOptions options) {
  // "::" is 0.0.0.0 where the pod has no IPv6, as for the coordinator (--listen-address).
  if (options.listen_address == "::") {
    int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0 && errno == EAFNOSUPPORT) options.listen_address = "0.0.0.0";
    if (probe >= 0) close(probe);
  }
  const bool v4 = options.listen_address.find(':') == std::string::npos;
  int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(Exit::kOsErr, "cannot make a socket: {}", std::strerror(errno));
  int on = 1;
  int off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_storage address{};
  socklen_t size = 0;
  bool parsed = false;
  if (v4) {
    auto& in = reinterpret_cast<sockaddr_in&>(address);
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<uint16_t>(options.port));
    parsed = inet_pton(AF_INET, options.listen_address.c_str(), &in.sin_addr) == 1;
    size = sizeof in;
  } else {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // "::" takes IPv4 too
    auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(static_cast<uint16_t>(options.port));
    parsed = inet_pton(AF_INET6, options.listen_address.c_str(), &in6.sin6_addr) == 1;
    size = sizeof in6;
  }
  if (!parsed) {
    close(fd);
    return make_error(Exit::kUsage, "--listen-address {}: not an IP address; give one such as :: or 0.0.0.0",
                      options.listen_address);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 || listen(fd, 128) != 0) {
    int error = errno;
    close(fd);
    if (options.listen_address == "::" && error == EADDRNOTAVAIL) {  // IPv6 off in this pod
      options.listen_address = "0.0.0.0";
      return listen_on(options);
    }
    return make_error(Exit::kUnavailable, "cannot listen on port {} ({}): {}; is another sshd there?",
                      options.port, options.listen_address, std::strerror(error));
  }
  return fd;
}

std::string describe_peer(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(v4.sin_port));
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  return fmt::format("[{}]:{}", text, ntohs(v6.sin6_port));
}

namespace {

constexpr int kListenerTickMs = 100;
constexpr Millis kSpareRetry{1000};  // after a spare that ended unused: not a fork loop
constexpr std::size_t kMaxReportLine = 2048;

// A connection process made before its client: forked, split into its monitor and its
// session process, which enters its sandbox and then waits on `handoff` (connection_process.cpp).
// `client_fd`: the socket of a client waiting for this spare (one made on the spot), which the
// spare must not inherit: it reaches the session process by the handoff alone, once sandboxed.
bool make_spare(Server::State& server, int client_fd = -1) {
  int report[2];
  int handoff[2];
  if (pipe2(report, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, handoff) != 0) {
    close(report[0]);
    close(report[1]);
    return false;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    close(handoff[0]);
    close(server.listen_fd);
    if (client_fd >= 0) close(client_fd);
    for (auto& [other, child] : server.children) close(child.report_fd);
    for (auto& [other, report_fd] : server.unused_spares) close(report_fd);
    server.children.clear();
    server.unused_spares.clear();
    server.report_fd = report[1];
    serve_connection_process(server, handoff[1]);
  }
  close(report[1]);
  close(handoff[1]);
  if (pid < 0) {
    close(report[0]);
    close(handoff[0]);
    return false;
  }
  server.spare = Spare{pid, handoff[0], report[0]};
  return true;
}

// The accepted socket and its peer's address to the spare, which becomes its connection's
// process; false when no spare could be made or it has gone (its end is reaped as any child).
bool hand_to_spare(Server::State& server, int fd, const sockaddr_storage& client) {
  if (!server.spare && !make_spare(server, fd)) return false;
  const bool sent =
      send_with_fds(server.spare->handoff_fd, &client, sizeof client, std::span<const int>(&fd, 1),
                    MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof client);
  // Either way this spare is done: it serves the socket, or it has gone and is reaped.
  close(server.spare->handoff_fd);
  server.spare->handoff_fd = -1;
  if (!sent) {
    kill(server.spare->pid, SIGTERM);
    server.unused_spares[server.spare->pid] = server.spare->report_fd;
    server.spare.reset();
  }
  return sent;
}

void start_connection_process(Server::State& server, int fd, const sockaddr_storage& client,
                              const std::string& peer, const std::string& source, Clock::time_point now) {
  bool handed = hand_to_spare(server, fd, client);
  if (!handed) handed = hand_to_spare(server, fd, client);  // a spare that had gone: one made at once
  close(fd);
  if (!handed) {
    log_refusal(server, "fork", fmt::format("{}: no process for it: {}", peer, std::strerror(errno)));
    return;
  }
  const pid_t pid = server.spare->pid;
  server.children[pid] = ChildProcess{peer, source, server.spare->report_fd, ""};
  server.spare.reset();
  server.admission.admitted(pid, source, now);
}

void admit(Server::State& server, int fd, const sockaddr_storage& client, Clock::time_point now) {
  const std::string peer = describe_peer(client);
  const std::string source = endpoint_of(client).address;
  if (server.stopping) {
    close(fd);
    return;
  }
  Admit decision = server.admission.on_connect(source, now);
  if (decision.kind == Admit::Kind::kRefuse) {
    log_refusal(server, decision.reason, decision.refusal);
    close(fd);
    return;
  }
  if (decision.kind == Admit::Kind::kAdmitDropping) kill(decision.drop, SIGUSR1);
  start_connection_process(server, fd, client, peer, source, now);
}

void accept_ready(Server::State& server, Clock::time_point now) {
  while (true) {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    int fd =
        accept4(server.listen_fd, reinterpret_cast<sockaddr*>(&address), &size, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors (EMFILE, ENFILE) or another failure: the socket stays readable, so
      // accepting pauses for a moment rather than spin, and the line is rate-limited.
      log_refusal(server, "accept",
                  fmt::format("accept: {}; not accepting for 200 ms", std::strerror(errno)));
      server.accept_paused_until = now + Millis(200);
      return;
    }
    admit(server, fd, address, now);
  }
}

// One report line of a connection process (server_state.h, kReport*).
void take_report(Server::State& server, pid_t pid, const std::string& line, Clock::time_point now) {
  if (line.empty()) return;
  if (line[0] == kReportBanner) server.admission.on_banner(pid);
  if (line[0] == kReportLogin) server.admission.on_login(pid);
  if (line[0] == kReportRefusal) {
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) return;
    if (auto told = server.refusals.note(line.substr(1, tab - 1), line.substr(tab + 1), now)) {
      spdlog::warn("{}", *told);
    }
  }
}

void read_reports(Server::State& server, pid_t pid, ChildProcess& child, Clock::time_point now) {
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(child.report_fd, buffer, sizeof buffer)) > 0) {
    child.pending.append(buffer, static_cast<std::size_t>(got));
    std::size_t end = 0;
    while ((end = child.pending.find('\n')) != std::string::npos) {
      take_report(server, pid, child.pending.substr(0, end), now);
      child.pending.erase(0, end + 1);
    }
    if (child.pending.size() > kMaxReportLine) child.pending.clear();  // not ours: the process writes less
  }
}

void reap(Server::State& server, Clock::time_point now) {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (server.spare && server.spare->pid == pid) {  // it ended before any client: made again later
      spdlog::error("a spare connection process ended before its client (wait status {})", status);
      close(server.spare->handoff_fd);
      server.unused_spares[pid] = server.spare->report_fd;
      server.spare.reset();
      server.next_spare_at = now + kSpareRetry;
    }
    if (auto unused = server.unused_spares.find(pid); unused != server.unused_spares.end()) {
      close(unused->second);
      server.unused_spares.erase(unused);
      continue;
    }
    auto found = server.children.find(pid);
    if (found == server.children.end()) continue;   // an orphan a command left, adopted as PID 1
    read_reports(server, pid, found->second, now);  // what it said before its end comes first
    close(found->second.report_fd);
    const Ending ending = ending_of(status);
    if (ending == Ending::kCrashed) {
      spdlog::error("{}: its connection process died of signal {}", found->second.peer, WTERMSIG(status));
    }
    if (auto penalty = server.admission.on_end(pid, ending, now)) spdlog::warn("{}", *penalty);
    server.children.erase(found);
  }
}

void read_listener_signals(Server::State& server, Clock::time_point now) {
  signalfd_siginfo info{};
  while (read(server.signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo == SIGCHLD || server.stopping) continue;
    server.stopping = true;
    spdlog::info("signal {}: hanging up every command and stopping", info.ssi_signo);
    close(server.listen_fd);
    server.listen_fd = -1;
    for (const auto& [pid, child] : server.children) kill(pid, SIGTERM);
    if (server.spare) {
      close(server.spare->handoff_fd);
      kill(server.spare->pid, SIGTERM);
      server.unused_spares[server.spare->pid] = server.spare->report_fd;
      server.spare.reset();
    }
  }
  reap(server, now);
}

// At the stop: the groups just killed are reaped before the server goes (half a second at
// most), so that none is left a zombie for whoever adopts it.
void reap_the_rest() {
  for (int tries = 0; tries < 50; ++tries) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return;
    usleep(10000);
  }
}

}  // namespace

Status Server::run() {
  State& state = *state_;
  std::vector<pollfd> watched;
  std::vector<pid_t> owners;  // the connection process of each report pipe in `watched`
  while (true) {
    const auto before = Clock::now();
    if (state.accept_paused_until && before >= *state.accept_paused_until) state.accept_paused_until.reset();
    const bool accepting = state.listen_fd >= 0 && !state.accept_paused_until;
    watched.assign({{state.signal_fd, POLLIN, 0}, {accepting ? state.listen_fd : -1, POLLIN, 0}});
    owners.clear();
    for (const auto& [pid, child] : state.children) {
      watched.push_back({child.report_fd, POLLIN, 0});
      owners.push_back(pid);
    }
    poll(watched.data(), watched.size(), kListenerTickMs);
    const auto now = Clock::now();
    for (std::size_t i = 2; i < watched.size(); ++i) {
      auto found = state.children.find(owners[i - 2]);
      if (watched[i].revents != 0 && found != state.children.end())
        read_reports(state, found->first, found->second, now);
    }
    if (watched[0].revents != 0) read_listener_signals(state, now);
    if (watched[1].revents != 0 && state.listen_fd >= 0) accept_ready(state, now);
    for (const std::string& line : state.refusals.flush(now)) spdlog::warn("{}", line);
    // The next spare once the server is idle (no connection process left): it never takes a
    // core from a handshake, or from the ranks of a job whose daemons' sessions are open; while
    // some are, each new connection gets one made for it on the spot.
    if (!state.stopping && !state.spare && state.children.empty() &&
        (!state.next_spare_at || now >= *state.next_spare_at)) {
      state.next_spare_at.reset();
      if (!make_spare(state)) state.next_spare_at = now + kSpareRetry;
    }
    if (state.stopping && state.children.empty() && state.unused_spares.empty()) {
      reap_the_rest();
      return ok_status();
    }
  }
}

}  // namespace tmpi::nodessh
