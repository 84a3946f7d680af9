// See server.h. The loop: poll (libssh's ssh_event; at least every 100 ms, for the timers),
// then accept, reap, and walk every connection and channel once. Signals (SIGCHLD, SIGTERM,
// SIGINT) come through a signalfd in the same poll, so that no handler runs inside libssh.
#include "nodessh/server.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "common/job_key.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

constexpr int kTickMs = 100;
// Only the algorithms that ssh-audit finds no fault with, and that every client of the job
// speaks (OpenSSH 9, libssh 0.10 in the launcher).
constexpr const char* kKeyExchange = "curve25519-sha256,curve25519-sha256@libssh.org";
constexpr const char* kCiphers =
    "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr,aes192-ctr,"
    "aes128-ctr";
constexpr const char* kMacs = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com";

Status load_job_key(Server::State& state) {
  TMPI_ASSIGN(KeyFile file, find_job_key(state.options.ssh_dir));
  ssh_key host_key = nullptr;
  if (ssh_pki_import_privkey_base64(file.text.c_str(), nullptr, nullptr, nullptr, &host_key) != SSH_OK) {
    return make_error(Exit::kData,
                      "{}: not a private key libssh can read (OpenSSH or PEM, without a passphrase)",
                      file.path);
  }
  if (ssh_pki_export_privkey_to_pubkey(host_key, &state.job_public) != SSH_OK) {
    ssh_key_free(host_key);
    return make_error(Exit::kSoftware, "{}: cannot derive the public key", file.path);
  }
  // The job key is the host key, as in the sshd_config mpi-init writes: the known_hosts
  // it writes pins the same key for every host. The bind owns the key from here.
  if (ssh_bind_options_set(state.bind, SSH_BIND_OPTIONS_IMPORT_KEY, host_key) != SSH_OK) {
    ssh_key_free(host_key);
    return make_error(Exit::kData, "{}: libssh cannot serve it as a host key", file.path);
  }
  return ok_status();
}

Status configure_bind(Server::State& state) {
  state.bind = ssh_bind_new();
  if (state.bind == nullptr) return make_error(Exit::kSoftware, "libssh could not make its server");
  bool no_config = false;  // no /etc/ssh/libssh_server_config: nothing outside decides
  ssh_bind_options_set(state.bind, SSH_BIND_OPTIONS_PROCESS_CONFIG, &no_config);
  TMPI_CHECK(load_job_key(state));
  const std::pair<ssh_bind_options_e, const char*> algorithms[] = {
      {SSH_BIND_OPTIONS_KEY_EXCHANGE, kKeyExchange},
      {SSH_BIND_OPTIONS_CIPHERS_C_S, kCiphers},
      {SSH_BIND_OPTIONS_CIPHERS_S_C, kCiphers},
      {SSH_BIND_OPTIONS_HMAC_C_S, kMacs},
      {SSH_BIND_OPTIONS_HMAC_S_C, kMacs},
  };
  for (const auto& [option, list] : algorithms) {
    if (ssh_bind_options_set(state.bind, option, list) != SSH_OK) {
      return make_error(Exit::kSoftware, "libssh refused the algorithms {}: {}", list,
                        ssh_get_error(state.bind));
    }
  }
  return ok_status();
}

Status watch_signals(Server::State& state) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write is an error return, not the end
  state.signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (state.signal_fd < 0) return make_error(Exit::kOsErr, "cannot make a signalfd");
  return ok_status();
}

void begin_stop(Server::State& state, int sig) {
  if (state.stopping) return;
  state.stopping = true;
  spdlog::info("signal {}: hanging up every command and stopping", sig);
  for (auto& connection : state.connections) connection->close_for("stopping", "the server is stopping");
}

void read_signals(Server::State& state) {
  signalfd_siginfo info{};
  while (read(state.signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo != SIGCHLD) begin_stop(state, static_cast<int>(info.ssi_signo));
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

void forget(Server::State& state, const Channel& channel) {
  auto found = state.by_pid.find(channel.command.pid);
  if (found != state.by_pid.end() && found->second == &channel) state.by_pid.erase(found);
}

// One connection's turn; false once it is over and freed.
bool serve_connection(Server::State& state, Connection& connection, Clock::time_point now) {
  if (!connection.key_exchanged && connection.drop.empty()) {
    int rc = ssh_handle_key_exchange(connection.session);
    if (rc == SSH_OK) connection.key_exchanged = true;
    if (rc == SSH_ERROR)
      connection.close_for("key exchange",
                           fmt::format("the key exchange failed: {}", ssh_get_error(connection.session)));
  }
  if (connection.drop.empty() && connection.gate.expired(now)) {
    connection.close_for("login grace",
                         fmt::format("not logged in within {} s", state.options.login_grace.count() / 1000));
  }
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

Server::State::~State() {
  connections.clear();
  orphans.clear();
  listen_watch.reset();
  signal_watch.reset();
  if (event != nullptr) ssh_event_free(event);
  if (bind != nullptr) ssh_bind_free(bind);
  if (job_public != nullptr) ssh_key_free(job_public);
  if (listen_fd >= 0) close(listen_fd);
  if (signal_fd >= 0) close(signal_fd);
}

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}
Server::~Server() = default;

int Server::port() const {
  return state_->port;
}

Expected<std::unique_ptr<Server>> Server::open(const SshdOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  const char* home = std::getenv("HOME");
  state->base_env["HOME"] = home != nullptr && *home != '\0' ? home : "/";
  TMPI_CHECK(configure_bind(*state));
  TMPI_ASSIGN(state->listen_fd, listen_on(options));
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  getsockname(state->listen_fd, reinterpret_cast<sockaddr*>(&address), &size);
  state->port = ntohs(address.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(address).sin_port
                                                   : reinterpret_cast<sockaddr_in6&>(address).sin6_port);
  TMPI_CHECK(watch_signals(*state));
  state->event = ssh_event_new();
  if (state->event == nullptr) return make_error(Exit::kSoftware, "libssh could not make its event loop");
  state->listen_watch = std::make_unique<Watch>(state->event, state->listen_fd);
  state->listen_watch->want(POLLIN);
  state->signal_watch = std::make_unique<Watch>(state->event, state->signal_fd);
  state->signal_watch->want(POLLIN);
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

Status Server::run() {
  State& state = *state_;
  while (true) {
    ssh_event_dopoll(state.event, kTickMs);
    const auto now = Clock::now();
    if (state.signal_watch->take_ready() != 0) read_signals(state);
    if (state.accept_paused_until && now >= *state.accept_paused_until) {
      state.accept_paused_until.reset();
      state.listen_watch->want(POLLIN);
    }
    if (state.listen_watch->take_ready() != 0) accept_ready(state, now);
    auto& connections = state.connections;
    for (std::size_t i = 0; i < connections.size();) {
      if (serve_connection(state, *connections[i], now)) {
        ++i;
      } else {
        connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    serve_orphans(state, now);
    for (const std::string& line : state.refusals.flush(now)) spdlog::warn("{}", line);
    if (state.stopping && connections.empty() && state.orphans.empty()) {
      reap_the_rest();
      return ok_status();
    }
  }
}

}  // namespace tmpi::nodessh
