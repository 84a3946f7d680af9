// The session process's side of its link to the connection's monitor (monitor.cpp says the
// split, monitor_protocol.h the frames): each command asked for and its descriptors taken as
// they come back, the login's signed bytes caught on their way to libcrypto and handed over
// for the monitor's own check (login_proof.h), the signals asked for. Every wait for an answer
// is bounded (10 s: a fork and a few syscalls, however loaded the node); one waited for in
// vain ends the requests, since a late answer would be taken for the next one's.
#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include "common/fd_passing.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

constexpr int kStartAnswerMs = 10000;

}  // namespace

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
  Received received = receive_with_fds(fd, buffer, sizeof buffer, MSG_DONTWAIT);
  const ssize_t got = received.bytes;
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  passed_fds.insert(passed_fds.end(), received.fds.begin(), received.fds.end());
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

}  // namespace tmpi::nodessh
