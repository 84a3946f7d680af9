// Session channels of mpi-sshd (server_state.h): libssh's channel callbacks ask
// ChannelRules, and the loop's pump moves bytes and carries out the rules' actions.
//
// Flow control both ways is the SSH window's (RFC 4254, section 5.2), with libssh's gaps
// closed, so that what the server holds for a channel stays bounded whatever its client does:
// - The client's bytes are taken from libssh only once the command has taken the last ones,
//   and then all that libssh holds at once: each read tops the window up to 1.28 MB whatever
//   is still held (libssh 0.10 src/channels.c, ssh_channel_read_timeout), so reading in small
//   steps let a fast client, within its window, grow what libssh held without bound. A client
//   that sends beyond the window, which libssh takes "anyway", is found by what libssh holds
//   (window_ignored, channel_rules.h), and its connection closed. Extended data from the
//   client goes nowhere, as under sshd.
// - The command's output is read only while the client's window has room, at most that much,
//   and only while the connection's socket has room: libssh queues whatever the socket does
//   not take, so a client that grants a window and then stops reading would have had the
//   server queue the command's output without bound (OpenSSH's sshd too stops reading its
//   channels while its output is large: serverloop.c, ssh_packet_not_very_much_data_to_write).
// A command that does not read its stdin, or a client that does not read, holds back only its
// own channel, and the other channels of its own connection.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include <spdlog/spdlog.h>

#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kMaxChannelsPerConnection = 10;  // sshd's MaxSessions

Channel& self(void* userdata) {
  return *static_cast<Channel*>(userdata);
}

int decide(Channel& channel, const Request& request) {
  Verdict verdict = channel.rules.on_request(request);
  if (!verdict.accepted && channel.connection != nullptr) {
    // The reason is the refusal's first word, the request's type as the rules spell it.
    log_refusal(channel.connection->server, verdict.refusal.substr(0, verdict.refusal.find(' ')),
                fmt::format("{}: {}", channel.peer, verdict.refusal));
  }
  // Before the failure's reply, which the client may take as the end (ssh -s: "subsystem
  // request failed"), so that it prints this first.
  if (!verdict.to_client.empty() && verdict.to_client.size() <= ssh_channel_window_size(channel.channel))
    ssh_channel_write_stderr(channel.channel, verdict.to_client.data(),
                             static_cast<uint32_t>(verdict.to_client.size()));
  return verdict.accepted ? 0 : -1;
}

// `what`: the command as the log names it ("exec CMD", "shell", "subsystem sftp (PATH)").
int start(Channel& channel, const std::string& what) {
  Server::State& server = channel.connection->server;
  Command command = *channel.rules.command();
  command.env.insert(command.env.end(), channel.connection->env.begin(), channel.connection->env.end());
  auto started = start_through_monitor(server, command, channel.size);
  if (!started) {
    spdlog::error("{}: {}", channel.connection->peer, started.error().message);
    channel.rules.command_failed();
    return -1;
  }
  channel.command = *started;
  server.by_pid[started->pid] = &channel;
  spdlog::info("{}: started pid {}: {}", channel.connection->peer, started->pid, what);
  return 0;
}

int on_pty(ssh_session /*session*/, ssh_channel /*handle*/, const char* term, int width, int height,
           int width_px, int height_px, void* userdata) {
  Channel& channel = self(userdata);
  channel.size = TerminalSize{width, height, width_px, height_px};
  return decide(channel, Request{RequestKind::kPty, term, ""});
}

int on_env(ssh_session /*session*/, ssh_channel /*handle*/, const char* name, const char* value,
           void* userdata) {
  return decide(self(userdata), Request{RequestKind::kEnv, name, value});
}

int on_exec(ssh_session /*session*/, ssh_channel /*handle*/, const char* command, void* userdata) {
  Channel& channel = self(userdata);
  if (decide(channel, Request{RequestKind::kExec, "", command}) != 0) return -1;
  return start(channel, "exec " + std::string(command).substr(0, 200));
}

int on_shell(ssh_session /*session*/, ssh_channel /*handle*/, void* userdata) {
  Channel& channel = self(userdata);
  if (decide(channel, Request{RequestKind::kShell, "", ""}) != 0) return -1;
  return start(channel, "shell");
}

int on_window_change(ssh_session /*session*/, ssh_channel /*handle*/, int width, int height, int width_px,
                     int height_px, void* userdata) {
  Channel& channel = self(userdata);
  if (decide(channel, Request{RequestKind::kWindowChange, "", ""}) != 0) return -1;
  channel.size = TerminalSize{width, height, width_px, height_px};
  if (channel.command.stdin_fd >= 0) resize_terminal(channel.command.stdin_fd, channel.size);
  return 0;
}

void on_signal(ssh_session /*session*/, ssh_channel /*handle*/, const char* name, void* userdata) {
  Channel& channel = self(userdata);
  Request request{RequestKind::kSignal, name, ""};
  if (decide(channel, request) != 0) return;
  if (auto action = channel.rules.signal_action(request))
    signal_group(*channel.server, channel.command.pid, action->number);
}

int on_subsystem(ssh_session /*session*/, ssh_channel /*handle*/, const char* name, void* userdata) {
  Channel& channel = self(userdata);
  const std::string program = std::string_view(name) == "sftp" ? find_sftp_server() : "";
  if (decide(channel, Request{RequestKind::kSubsystem, name, program}) != 0) return -1;
  return start(channel, fmt::format("subsystem sftp ({})", program));
}

// Every packet of the client's data, as libssh takes it: nothing is taken here (pump_stdin
// reads it), only what libssh holds is judged. Extended data, which no session uses from a
// client, is taken and dropped, as sshd drops it.
int on_data(ssh_session /*session*/, ssh_channel /*handle*/, void* /*data*/, uint32_t held, int is_stderr,
            void* userdata) {
  if (is_stderr != 0) return static_cast<int>(held);
  Channel& channel = self(userdata);
  if (auto ignored = window_ignored(held); ignored && channel.connection != nullptr)
    channel.connection->close_for("window", *ignored);
  return 0;
}

void on_auth_agent(ssh_session /*session*/, ssh_channel /*handle*/, void* userdata) {
  decide(self(userdata), Request{RequestKind::kAuthAgent, "", ""});
}

void on_close(ssh_session /*session*/, ssh_channel /*handle*/, void* userdata) {
  self(userdata).client_closed = true;
}

void carry_out(Channel& channel, const std::vector<Action>& actions) {
  const pid_t group = channel.command.pid;
  const std::string& peer = channel.peer;
  for (const Action& action : actions) {
    switch (action.kind) {
      case ActionKind::kSignalGroup:
        signal_group(*channel.server, group, action.number);
        break;
      case ActionKind::kSendExitStatus:
        ssh_channel_request_send_exit_status(channel.channel, action.number);
        break;
      case ActionKind::kSendExitSignal:
        ssh_channel_request_send_exit_signal(channel.channel, action.text.c_str(), action.number, "", "");
        break;
      case ActionKind::kSendEofAndClose:
        ssh_channel_send_eof(channel.channel);
        ssh_channel_close(channel.channel);
        break;
      case ActionKind::kHangupGroup:
        spdlog::info("{}: the client has gone; SIGHUP to process group {}", peer, group);
        // SIGCONT too, as the kernel sends to an orphaned group: a stopped process would
        // not see the hangup.
        signal_group(*channel.server, group, SIGHUP), signal_group(*channel.server, group, SIGCONT);
        break;
      case ActionKind::kKillGroup:
        spdlog::warn("{}: process group {} outlived the hangup's grace; SIGKILL", peer, group);
        signal_group(*channel.server, group, SIGKILL);
        break;
    }
  }
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The client's bytes into the command's stdin; its EOF closes the pipe (a pty has none).
void pump_stdin(Channel& channel) {
  StartedCommand& command = channel.command;
  if (channel.stdin_closed || command.stdin_fd < 0) return;
  const bool pty = command.stdin_fd == command.stdout_fd;
  while (true) {
    if (channel.to_stdin.empty()) {
      // All that libssh holds, in one read: one read of less would top the window up again
      // with the rest still held (the file's opening comment).
      const int held = ssh_channel_poll(channel.channel, 0);
      int got = held;
      if (held > 0) {
        channel.to_stdin.resize(static_cast<std::size_t>(held));
        got = ssh_channel_read_nonblocking(channel.channel, channel.to_stdin.data(),
                                           static_cast<uint32_t>(held), 0);
        channel.to_stdin.resize(static_cast<std::size_t>(std::max(got, 0)));
      }
      if (got <= 0) {
        if (got < 0 || ssh_channel_is_eof(channel.channel) != 0) {
          channel.stdin_closed = true;
          if (!pty) close_fd(command.stdin_fd);
        }
        break;
      }
    }
    ssize_t wrote = write(command.stdin_fd, channel.to_stdin.data(), channel.to_stdin.size());
    if (wrote < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (wrote < 0) {  // the command closed its stdin: what the client sends goes nowhere
      channel.to_stdin.clear();
      channel.stdin_closed = true;
      if (!pty) close_fd(command.stdin_fd);
      break;
    }
    channel.to_stdin.erase(0, static_cast<std::size_t>(wrote));
  }
  if (channel.stdin_watch)
    channel.stdin_watch->want(channel.to_stdin.empty() || channel.stdin_closed ? 0 : POLLOUT);
}

// Whether the connection's socket takes more now. libssh queues what the socket does not take
// (libssh 0.10 src/socket.c), and after one write in a pass queues the rest until the next
// poll; so the outputs of all the connection's channels are read only while the socket has
// room, each once a pass, and what libssh queues is at most one pass's reads. (libssh's
// SSH_WRITE_PENDING would say the same, but it is set by every write until the next poll: the
// first channel of a pass would be the only one to send.)
bool socket_has_room(const Channel& channel) {
  if (channel.connection == nullptr) return false;
  pollfd socket{ssh_get_fd(channel.connection->session), POLLOUT, 0};
  return poll(&socket, 1, 0) == 1 && (socket.revents & POLLOUT) != 0;
}

// One of the command's outputs to the channel, within the client's window, while the socket
// has room.
void pump_output(Channel& channel, int& fd, std::unique_ptr<Watch>& watch, bool is_stderr) {
  if (fd < 0) return;
  const auto window =
      socket_has_room(channel) ? static_cast<std::size_t>(ssh_channel_window_size(channel.channel)) : 0;
  if (window > 0 && (watch->take_ready() != 0)) {
    char buffer[kChunk];
    ssize_t got = read(fd, buffer, std::min(window, sizeof buffer));
    if (got > 0) {
      auto size = static_cast<uint32_t>(got);
      if (is_stderr) {
        ssh_channel_write_stderr(channel.channel, buffer, size);
      } else {
        ssh_channel_write(channel.channel, buffer, size);
      }
    } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {  // EOF; EIO from a pty
      watch.reset();
      if (fd == channel.command.stdin_fd) {
        channel.command.stdin_fd = -1;
        channel.stdin_watch.reset();
      }
      close_fd(fd);
      return;
    }
  }
  watch->want(window > 0 ? POLLIN : 0);
}

}  // namespace

ssh_channel open_session_channel(ssh_session session, void* userdata) {
  auto& connection = *static_cast<Connection*>(userdata);
  if (!connection.gate.authenticated()) return nullptr;
  if (connection.channels.size() >= kMaxChannelsPerConnection) {
    log_refusal(connection.server, "session channel",
                fmt::format("{}: a session channel refused: {} are open", connection.peer,
                            connection.channels.size()));
    return nullptr;
  }
  ssh_channel handle = ssh_channel_new(session);
  if (handle == nullptr) return nullptr;
  const SshdOptions& options = connection.server.options;
  auto channel = std::make_unique<Channel>(connection, connection.peer, handle,
                                           ChannelLimits{options.accept_env, options.hangup_grace});
  channel->server = &connection.server;
  ssh_channel_callbacks_struct& callbacks = channel->callbacks;
  callbacks.userdata = channel.get();
  callbacks.channel_pty_request_function = on_pty;
  callbacks.channel_env_request_function = on_env;
  callbacks.channel_exec_request_function = on_exec;
  callbacks.channel_shell_request_function = on_shell;
  callbacks.channel_pty_window_change_function = on_window_change;
  callbacks.channel_signal_function = on_signal;
  callbacks.channel_subsystem_request_function = on_subsystem;
  callbacks.channel_auth_agent_req_function = on_auth_agent;
  callbacks.channel_close_function = on_close;
  callbacks.channel_data_function = on_data;
  ssh_callbacks_init(&callbacks);
  ssh_set_channel_callbacks(handle, &callbacks);
  connection.channels.push_back(std::move(channel));
  return handle;
}

void pump_channel(Channel& channel, Clock::time_point now) {
  StartedCommand& command = channel.command;
  ssh_event event = channel.connection != nullptr ? channel.connection->server.event : nullptr;
  if (!channel.released && command.pid > 0) {
    if (!channel.stdout_watch && command.stdout_fd >= 0) {
      channel.stdout_watch = std::make_unique<Watch>(event, command.stdout_fd);
      if (command.stderr_fd >= 0) channel.stderr_watch = std::make_unique<Watch>(event, command.stderr_fd);
      if (command.stdin_fd != command.stdout_fd)
        channel.stdin_watch = std::make_unique<Watch>(event, command.stdin_fd);
    }
    pump_stdin(channel);
    pump_output(channel, command.stdout_fd, channel.stdout_watch, false);
    pump_output(channel, command.stderr_fd, channel.stderr_watch, true);
    if (command.stdout_fd < 0 && command.stderr_fd < 0 && !channel.output_ended_told) {
      channel.output_ended_told = true;
      carry_out(channel, channel.rules.on_output_ended());
    }
  }
  if (channel.client_closed) carry_out(channel, channel.rules.on_client_gone(now));
  if (command.pid > 0)
    carry_out(channel, channel.rules.on_tick(now, command_group_alive(*channel.server, command.pid)));
}

void command_exited(Channel& channel, int status) {
  carry_out(channel, channel.rules.on_exit(status));
}

void connection_gone(Connection& connection, Clock::time_point now) {
  for (auto& channel : connection.channels) {
    carry_out(*channel, channel->rules.on_client_gone(now));
    if (channel->channel != nullptr) ssh_remove_channel_callbacks(channel->channel, &channel->callbacks);
    channel->channel = nullptr;  // freed with the session
    channel->connection = nullptr;
    retire_channel(*channel);
  }
}

bool retire_channel(Channel& channel) {
  const bool over = channel.rules.finished();
  const bool gone = channel.client_closed || channel.connection == nullptr;
  if (!over && !gone) return false;
  if (!channel.released) {
    channel.stdin_watch.reset();
    channel.stdout_watch.reset();
    channel.stderr_watch.reset();
    StartedCommand& command = channel.command;
    if (command.stdin_fd == command.stdout_fd) command.stdin_fd = -1;
    close_fd(command.stdin_fd);
    close_fd(command.stdout_fd);
    close_fd(command.stderr_fd);
    if (channel.channel != nullptr) {
      // ssh_channel_free on a channel the client has not closed yet only sends our close:
      // libssh keeps the channel, and its callbacks, until the client's close comes, which
      // would then call on_close with this Channel freed (ASan saw it). So they go first.
      ssh_remove_channel_callbacks(channel.channel, &channel.callbacks);
      ssh_channel_free(channel.channel);
    }
    channel.channel = nullptr;
    channel.released = true;
  }
  return over;
}

void Watch::want(short events) {
  if (events == registered_) return;
  if (registered_ != 0) ssh_event_remove_fd(event_, fd_);
  if (events != 0) ssh_event_add_fd(event_, fd_, events, on_ready, this);
  registered_ = events;
}

int Watch::on_ready(socket_t /*fd*/, int revents, void* self) {
  static_cast<Watch*>(self)->ready_ |= revents;
  return 0;
}

}  // namespace tmpi::nodessh
