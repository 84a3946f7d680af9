// A connection process's one connection (server_state.h): its libssh session, and its login.
//
// libssh is used as its own server example uses it (libssh examples/ssh_server.c: server
// callbacks for authentication and the session channel, channel callbacks for its requests),
// with two changes: the socket is accepted by the listener and handed over with
// ssh_bind_accept_fd(), and ssh_handle_key_exchange() runs non-blocking, called again after
// each poll until it is done (libssh's server.c keeps its state between calls).
//
// Every way to log in but the job key is refused and counted against --sshd-auth-tries, and
// named in the (rate-limited) log: a wrong key, password, keyboard-interactive, gssapi-with-mic
// (libssh answers it before any message callback, when built with GSSAPI: its
// gssapi_select_oid callback is the one place to refuse it, libssh src/gssapi.c,
// ssh_gssapi_handle_userauth), and "none" after the first.
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

// A way to log in that is not the job key's: counted, and the connection closed at the last.
void refuse_method(Connection& connection, AuthVerdict verdict) {
  if (verdict != AuthVerdict::kDeniedLast) return;
  connection.close_for("auth tries", fmt::format("{} authentication attempts refused",
                                                 connection.server.options.max_auth_tries));
}

int on_publickey(ssh_session /*session*/, const char* user, ssh_key key, char state, void* userdata) {
  auto& connection = *static_cast<Connection*>(userdata);
  bool is_job_key = ssh_key_cmp(connection.server.job_public, key, SSH_KEY_CMP_PUBLIC) == 0;
  if (state == SSH_PUBLICKEY_STATE_WRONG || state == SSH_PUBLICKEY_STATE_ERROR) is_job_key = false;
  // A signed login with the job key counts only once the monitor has verified it itself.
  std::string why;
  if (is_job_key && state == SSH_PUBLICKEY_STATE_VALID && !login_confirmed(connection.server, why)) {
    log_refusal(connection.server, "monitor",
                fmt::format("{}: the monitor refused the login of {}: {}", connection.peer,
                            rdv::excerpt(user), rdv::excerpt(why)));
    is_job_key = false;
  }
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
    case AuthVerdict::kMethodsListed:
      refuse_method(connection, AuthVerdict::kDeniedLast);
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
  AuthVerdict verdict = AuthVerdict::kDenied;
  if (type == SSH_REQUEST_AUTH) {
    verdict = subtype == SSH_AUTH_METHOD_NONE ? connection.gate.on_none() : connection.gate.on_other_method();
    if (verdict == AuthVerdict::kMethodsListed) return 1;  // the default answer lists "publickey"
  }
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
  if (type == SSH_REQUEST_AUTH) refuse_method(connection, verdict);
  return 1;
}

// gssapi-with-mic: no mechanism is chosen, so libssh answers a failure; refused and counted.
ssh_string on_gssapi(ssh_session /*session*/, const char* user, int /*n_oid*/, ssh_string* /*oids*/,
                     void* userdata) {
  auto& connection = *static_cast<Connection*>(userdata);
  log_refusal(connection.server, "gssapi",
              fmt::format("{}: gssapi-with-mic for {} refused: only the job key logs in", connection.peer,
                          rdv::excerpt(user == nullptr ? "" : user)));
  refuse_method(connection, connection.gate.on_other_method());
  return nullptr;
}

}  // namespace

bool start_session(Server::State& server, int fd, const sockaddr_storage& client, const std::string& peer,
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
    return false;
  }
  ssh_set_blocking(session, 0);
  ssh_set_auth_methods(session, SSH_AUTH_METHOD_PUBLICKEY);
  ssh_server_callbacks_struct& callbacks = connection->callbacks;
  callbacks.userdata = connection.get();
  callbacks.auth_pubkey_function = on_publickey;
  callbacks.gssapi_select_oid_function = on_gssapi;
  callbacks.channel_open_request_session_function = open_session_channel;
  ssh_callbacks_init(&callbacks);
  ssh_set_server_callbacks(session, &callbacks);
  ssh_set_message_callback(session, on_unhandled, connection.get());
  if (ssh_handle_key_exchange(session) == SSH_ERROR) {
    log_refusal(server, "key exchange",
                fmt::format("{}: the key exchange failed: {}", peer, ssh_get_error(session)));
    ssh_free(session);
    return false;
  }
  ssh_event_add_session(server.event, session);
  connection->in_event = true;
  server.connection = std::move(connection);
  return true;
}

}  // namespace tmpi::nodessh
