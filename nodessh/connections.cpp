// Connections of mpi-sshd (server_state.h): the listening socket, the accept with its bound,
// and each connection's login.
//
// libssh is used as its own server example uses it (libssh examples/ssh_server.c: server
// callbacks for authentication and the session channel, channel callbacks for its requests),
// with two changes for one process serving all: the socket is accepted here and handed over
// with ssh_bind_accept_fd(), and ssh_handle_key_exchange() runs non-blocking, called again
// after each poll until it is done (libssh's server.c keeps its state between calls).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/job_key.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

// TCP keepalive, so that a peer that vanished (a node that lost power: no FIN, no RST) ends
// its connection within about 30 s: sshd's TCPKeepAlive, with the kernel's 2 h default cut.
void keep_alive(int fd) {
  int on = 1;
  int idle = 10;
  int interval = 5;
  int count = 4;
  unsigned timeout_ms = 30000;  // unacknowledged data, where keepalives do not probe
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof timeout_ms);
}

std::string describe_peer(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
    return fmt::format("{}:{}", text, port);
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  port = ntohs(v6.sin6_port);
  return fmt::format("[{}]:{}", text, port);
}

int on_publickey(ssh_session /*session*/, const char* user, ssh_key key, char state, void* userdata) {
  auto& connection = *static_cast<Connection*>(userdata);
  bool is_job_key = ssh_key_cmp(connection.server.job_public, key, SSH_KEY_CMP_PUBLIC) == 0;
  if (state == SSH_PUBLICKEY_STATE_WRONG || state == SSH_PUBLICKEY_STATE_ERROR) is_job_key = false;
  switch (connection.gate.on_publickey(is_job_key, state == SSH_PUBLICKEY_STATE_VALID)) {
    case AuthVerdict::kAccepted:
      spdlog::info("{}: logged in as {} with the job key", connection.peer, rdv::excerpt(user));
      return SSH_AUTH_SUCCESS;
    case AuthVerdict::kProbeAccepted:
      return SSH_AUTH_SUCCESS;  // libssh answers "this key would do" (SSH_MSG_USERAUTH_PK_OK)
    case AuthVerdict::kDenied:
      log_refusal(connection.server, "key",
                  fmt::format("{}: a public key for {} refused: not the job key", connection.peer,
                              rdv::excerpt(user)));
      return SSH_AUTH_DENIED;
    case AuthVerdict::kDeniedLast:
      connection.close_for("auth tries", fmt::format("{} authentication attempts refused",
                                                     connection.server.options.max_auth_tries));
      return SSH_AUTH_DENIED;
  }
  return SSH_AUTH_DENIED;
}

// What no callback took: refused with libssh's default answer, and named in the log.
int on_unhandled(ssh_session /*session*/, ssh_message message, void* userdata) {
  auto& connection = *static_cast<Connection*>(userdata);
  const int type = ssh_message_type(message);
  const int subtype = ssh_message_subtype(message);
  if (type == SSH_REQUEST_SERVICE) return 1;  // "ssh-userauth": the default accepts it
  if (type == SSH_REQUEST_AUTH && subtype == SSH_AUTH_METHOD_NONE) return 1;  // lists "publickey"
  if (type == SSH_REQUEST_GLOBAL && subtype == SSH_GLOBAL_REQUEST_KEEPALIVE) return 1;
  Refused refused{type, subtype, ""};
  if (type == SSH_REQUEST_CHANNEL_OPEN && subtype == SSH_CHANNEL_DIRECT_TCPIP) {
    const char* to = ssh_message_channel_request_open_destination(message);
    refused.target = rdv::excerpt(fmt::format("{}:{}", to == nullptr ? "?" : to,
                                              ssh_message_channel_request_open_destination_port(message)));
  } else if (type == SSH_REQUEST_GLOBAL && subtype == SSH_GLOBAL_REQUEST_TCPIP_FORWARD) {
    const char* at = ssh_message_global_request_address(message);
    refused.target = rdv::excerpt(
        fmt::format("{}:{}", at == nullptr ? "?" : at, ssh_message_global_request_port(message)));
  }
  log_refusal(connection.server, fmt::format("message {}.{}", type, subtype),
              fmt::format("{}: {}", connection.peer, describe_refusal(refused)));
  if (type == SSH_REQUEST_AUTH && connection.gate.on_other_method() == AuthVerdict::kDeniedLast) {
    connection.close_for("auth tries", fmt::format("{} authentication attempts refused",
                                                   connection.server.options.max_auth_tries));
  }
  return 1;
}

}  // namespace

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

namespace {

void accept_one(Server::State& server, int fd, const sockaddr_storage& client, const std::string& peer,
                Clock::time_point now) {
  keep_alive(fd);
  ssh_session session = ssh_new();
  auto connection = std::make_unique<Connection>(
      server, session, LoginGate(now, server.options.login_grace, server.options.max_auth_tries));
  connection->peer = peer;
  sockaddr_storage local{};
  socklen_t local_size = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) == 0) {
    connection->env = connection_env(endpoint_of(client), endpoint_of(local));
  }
  if (session == nullptr || ssh_bind_accept_fd(server.bind, session, fd) != SSH_OK) {
    spdlog::error("{}: libssh could not take the connection: {}", peer, ssh_get_error(server.bind));
    if (session != nullptr) ssh_free(session);
    close(fd);
    return;
  }
  ssh_set_blocking(session, 0);
  ssh_set_auth_methods(session, SSH_AUTH_METHOD_PUBLICKEY);
  ssh_server_callbacks_struct& callbacks = connection->callbacks;
  callbacks.userdata = connection.get();
  callbacks.auth_pubkey_function = on_publickey;
  callbacks.channel_open_request_session_function = open_session_channel;
  ssh_callbacks_init(&callbacks);
  ssh_set_server_callbacks(session, &callbacks);
  ssh_set_message_callback(session, on_unhandled, connection.get());
  if (ssh_handle_key_exchange(session) == SSH_ERROR) {
    log_refusal(server, "key exchange",
                fmt::format("{}: the key exchange failed: {}", peer, ssh_get_error(session)));
    ssh_free(session);
    return;
  }
  ssh_event_add_session(server.event, session);
  connection->in_event = true;
  server.connections.push_back(std::move(connection));
}

}  // namespace

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
      server.listen_watch->want(0);
      server.accept_paused_until = now + Millis(200);
      return;
    }
    std::string peer = describe_peer(address);
    auto open = static_cast<int>(server.connections.size());
    if (server.stopping || !admits_connection(open, server.options.max_connections)) {
      log_refusal(server, "max connections",
                  fmt::format("{}: connection refused: {} are open, the most --sshd-max-connections allows",
                              peer, open));
      close(fd);
      continue;
    }
    accept_one(server, fd, address, peer, now);
  }
}

}  // namespace tmpi::nodessh
