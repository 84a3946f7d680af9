// The inside of nodessh/server.h: what the loop holds for each connection and each channel.
// libssh's callbacks (run inside ssh_event_dopoll) only record what happened here; the loop
// acts on it after each poll, so that no callback adds or removes a watched descriptor, or
// frees what libssh is still using.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>

#include "nodessh/channel_rules.h"
#include "nodessh/command.h"
#include "nodessh/server.h"
#include "nodessh/session_rules.h"
#include "rendezvous/refusal_log.h"

namespace tmpi::nodessh {

// One descriptor in the loop, with the events wanted now; `ready` gathers what poll saw.
class Watch {
 public:
  Watch(ssh_event event, int fd) : event_(event), fd_(fd) {}
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() { want(0); }
  void want(short events);
  int take_ready() { return std::exchange(ready_, 0); }

 private:
  static int on_ready(socket_t fd, int revents, void* self);
  ssh_event event_;
  int fd_;
  short registered_ = 0;
  int ready_ = 0;
};

struct Connection;

struct Channel {
  Channel(Connection& owner, std::string owner_peer, ssh_channel handle, ChannelLimits limits)
      : connection(&owner), peer(std::move(owner_peer)), channel(handle), rules(std::move(limits)) {}
  Connection* connection;  // nullptr once the connection has gone
  std::string peer;        // the connection's, for the log
  ssh_channel channel;     // freed with the channel, or with its session
  ssh_channel_callbacks_struct callbacks{};
  ChannelRules rules;
  TerminalSize size;
  StartedCommand command;
  std::unique_ptr<Watch> stdin_watch, stdout_watch, stderr_watch;
  std::string to_stdin;  // read from the channel, not yet taken by the command
  bool stdin_closed = false;
  bool output_ended_told = false;
  bool client_closed = false;  // the client's close came (libssh's close callback)
  bool released = false;       // the ssh_channel is freed; only the rules' timer is left
};

struct Connection {
  Connection(Server::State& owner, ssh_session handle, LoginGate login)
      : server(owner), session(handle), gate(login) {}
  Server::State& server;
  ssh_session session;
  ssh_server_callbacks_struct callbacks{};
  LoginGate gate;
  std::string peer;  // "10.0.0.5:51234", for the log
  // SSH_CLIENT and SSH_CONNECTION, for every command of the connection (connection_env).
  std::vector<std::pair<std::string, std::string>> env;
  bool key_exchanged = false;
  bool in_event = false;
  std::string drop;         // set: why the connection is to be closed
  std::string drop_reason;  // its kind, for the rate-limited log: "login grace", "auth tries"...
  void close_for(std::string reason, std::string why) {
    drop_reason = std::move(reason);
    drop = std::move(why);
  }
  std::vector<std::unique_ptr<Channel>> channels;
};

struct Server::State {
  SshdOptions options;
  ssh_bind bind = nullptr;
  ssh_event event = nullptr;
  ssh_key job_public = nullptr;
  int listen_fd = -1;
  int signal_fd = -1;
  int port = 0;
  std::unique_ptr<Watch> listen_watch, signal_watch;
  std::optional<Clock::time_point> accept_paused_until;  // after an accept that failed
  std::map<std::string, std::string> base_env;           // HOME
  std::vector<std::unique_ptr<Connection>> connections;
  // Channels whose connection has gone, kept until their command's group has ended.
  std::vector<std::unique_ptr<Channel>> orphans;
  std::map<pid_t, Channel*> by_pid;
  rdv::RefusalLog refusals;  // one line per reason per 10 s: a stranger may refuse at line rate
  bool stopping = false;

  ~State();
};

// connections.cpp: the listening socket, and the connections it brings.
Expected<int> listen_on(SshdOptions options);
void accept_ready(Server::State& server, Clock::time_point now);

// channels.cpp: a connection's session channel, from its open to its end.
ssh_channel open_session_channel(ssh_session session, void* userdata);  // userdata: the Connection
// One pass over a channel after a poll: its pipes, its child's end, its rules' timer.
void pump_channel(Channel& channel, Clock::time_point now);
// The command of `pid` ended with wait() status `status`.
void command_exited(Channel& channel, int status);
// The connection is gone: every channel's command is hung up.
void connection_gone(Connection& connection, Clock::time_point now);
// Frees what a finished channel holds; true when nothing of it is left to watch.
bool retire_channel(Channel& channel);
// A refusal, for the log ("10.0.0.5:51234: x11-req refused: ..."), rate-limited by `reason`,
// one of a set fixed in the code.
void log_refusal(Server::State& server, const std::string& reason, const std::string& line);

}  // namespace tmpi::nodessh
