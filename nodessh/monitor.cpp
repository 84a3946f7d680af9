// A connection's monitor and the session process's side of its link (monitor_protocol.h).
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
#include <dlfcn.h>
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

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include "nodessh/login_proof.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

constexpr int kMaxPassedFds = 3;
constexpr int kStartAnswerMs = 10000;  // a fork and a few syscalls, however loaded the node

bool send_frame(int fd, const std::string& frame, const std::vector<int>& fds = {}) {
  std::size_t sent = 0;
  while (sent < frame.size()) {
    iovec part{const_cast<char*>(frame.data() + sent), frame.size() - sent};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)]{};
    if (sent == 0 && !fds.empty()) {  // the descriptors ride with the frame's first byte
      message.msg_control = control;
      message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t wrote = sendmsg(fd, &message, MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    sent += static_cast<std::size_t>(wrote);
  }
  return true;
}

}  // namespace

// --- The session process's side ---

// The one signature libssh verified last, as it went to libcrypto (login_proof.h says why).
// Armed only in a session process, before its sandbox; one thread, so no lock.
struct CaughtSignature {
  bool armed = false;
  bool caught = false;
  std::string signed_blob;
  std::string signature;
};
CaughtSignature caught_signature;

using DigestVerify = int (*)(EVP_MD_CTX*, const unsigned char*, size_t, const unsigned char*, size_t);
DigestVerify real_digest_verify = nullptr;

void arm_login_capture() {
  real_digest_verify = reinterpret_cast<DigestVerify>(dlsym(RTLD_NEXT, "EVP_DigestVerify"));
  caught_signature.armed = real_digest_verify != nullptr;
}

}  // namespace tmpi::nodessh

// libcrypto's one-shot verification, which libssh calls for a client's userauth signature
// (pki_crypto.c, pki_verify_data_signature): the bytes and the signature are kept on the way.
// Every other caller (the monitor's own check, the listener) passes through untouched.
extern "C" int EVP_DigestVerify(EVP_MD_CTX* ctx, const unsigned char* sigret, size_t siglen,
                                const unsigned char* tbs, size_t tbslen) {
  using tmpi::nodessh::caught_signature;
  if (tmpi::nodessh::real_digest_verify == nullptr)
    tmpi::nodessh::real_digest_verify =
        reinterpret_cast<tmpi::nodessh::DigestVerify>(dlsym(RTLD_NEXT, "EVP_DigestVerify"));
  if (tmpi::nodessh::real_digest_verify == nullptr) return -1;  // no libcrypto: nothing verifies
  if (caught_signature.armed && siglen <= 4096 && tbslen <= 65536) {
    caught_signature.caught = true;
    caught_signature.signed_blob.assign(reinterpret_cast<const char*>(tbs), tbslen);
    caught_signature.signature.assign(reinterpret_cast<const char*>(sigret), siglen);
  }
  return tmpi::nodessh::real_digest_verify(ctx, sigret, siglen, tbs, tbslen);
}

namespace tmpi::nodessh {

bool MonitorLink::receive(bool wait) {
  if (fd < 0) return false;
  if (wait) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, kStartAnswerMs) <= 0) {
      unanswered = true;
      return false;
    }
  }
  char buffer[65536];
  iovec part{buffer, sizeof buffer};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)]{};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      passed_fds.push_back(passed);
    }
  }
  if (got == 0 || !decoder.feed(std::string_view(buffer, static_cast<std::size_t>(got)))) {
    close(fd);
    fd = -1;
    return false;
  }
  while (auto next = decoder.next()) backlog.push_back(std::move(*next));
  return true;
}

int MonitorLink::take_fd() {
  if (passed_fds.empty()) return -1;
  int fd_taken = passed_fds.front();
  passed_fds.pop_front();
  return fd_taken;
}

Expected<StartedCommand> start_through_monitor(Server::State& state, const Command& command,
                                               const TerminalSize& size) {
  MonitorLink& link = state.monitor;
  if (!link.monitored) return start_command(command, state.base_env, size);  // a fuzzer's own process
  const std::uint32_t channel = ++link.last_channel;
  if (link.unanswered) return make_error(Exit::kOsErr, "the connection's monitor left an answer owed");
  if (!send_frame(link.fd, encode_monitor_message(StartRequest{channel, command, size})))
    return make_error(Exit::kOsErr, "the connection's monitor is gone");
  while (true) {
    for (auto it = link.backlog.begin(); it != link.backlog.end(); ++it) {
      if (const auto* started = std::get_if<Started>(&*it);
          started != nullptr && started->channel == channel) {
        StartedCommand out;
        out.pid = started->pid;
        out.stdin_fd = link.take_fd();
        out.stdout_fd = started->pty ? out.stdin_fd : link.take_fd();
        out.stderr_fd = started->pty ? -1 : link.take_fd();
        link.live_groups.insert(out.pid);
        link.backlog.erase(it);
        return out;
      }
      if (const auto* failed = std::get_if<StartFailed>(&*it);
          failed != nullptr && failed->channel == channel) {
        std::string why = failed->message;
        link.backlog.erase(it);
        return make_error(Exit::kOsErr, "{}", why);
      }
    }
    if (!link.receive(true)) return make_error(Exit::kOsErr, "the connection's monitor did not answer");
  }
}

bool login_confirmed(Server::State& state, std::string& why) {
  MonitorLink& link = state.monitor;
  if (!link.monitored) return true;  // a fuzzer's own process: libssh's check stands alone
  if (!std::exchange(caught_signature.caught, false)) {
    why = "no signature was caught on its way to libcrypto";
    return false;
  }
  LoginRequest request{std::move(caught_signature.signed_blob), std::move(caught_signature.signature)};
  if (link.unanswered || link.fd < 0 || !send_frame(link.fd, encode_monitor_message(request))) {
    why = "the connection's monitor is gone";
    return false;
  }
  while (true) {
    for (auto it = link.backlog.begin(); it != link.backlog.end(); ++it) {
      if (const auto* verdict = std::get_if<LoginVerdict>(&*it)) {
        const bool accepted = verdict->accepted;
        why = verdict->reason;
        link.backlog.erase(it);
        return accepted;
      }
    }
    if (!link.receive(true)) {
      why = "the connection's monitor did not answer";
      return false;
    }
  }
}

void signal_group(Server::State& state, pid_t group, int signal) {
  if (group <= 0) return;
  if (!state.monitor.monitored) {
    kill(-group, signal);
    return;
  }
  if (state.monitor.fd >= 0)
    send_frame(state.monitor.fd, encode_monitor_message(SignalRequest{group, signal}));
}

bool command_group_alive(const Server::State& state, pid_t group) {
  if (!state.monitor.monitored) return group_alive(group);
  return state.monitor.live_groups.contains(group);
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
    if (user) logged_in = *user;
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

void run_monitor(Server::State& state, int link, pid_t session) {
  Monitor monitor(state, link, session);
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
      monitor.verifier = std::move(*verifier);
    } else {
      spdlog::error("{}: no login can be verified, so none is taken", verifier.error().message);
    }
  }
  ssh_string_free_char(base64);
  while (true) {
    pollfd fds[2] = {{state.signal_fd, POLLIN, 0}, {monitor.link, POLLIN, 0}};
    poll(fds, monitor.link >= 0 ? 2 : 1, 100);
    monitor.read_signals();
    if (monitor.link >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) monitor.read_link();
    monitor.check_groups();
    if (monitor.finished(Clock::now())) break;
  }
  spdlog::default_logger()->flush();
  _exit(exit_status_of(ending_of(*monitor.session_status)));
}

}  // namespace tmpi::nodessh
