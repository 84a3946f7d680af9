// The inside of nodessh/server.h: what the listener holds for its connection processes, and
// what a connection process holds for its one connection and its channels. libssh's
// callbacks (run inside ssh_event_dopoll) only record what happened here; the loop acts on it
// after each poll, so that no callback adds or removes a watched descriptor, or frees what
// libssh is still using.
#pragma once

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>

#include "nodessh/admission.h"
#include "nodessh/channel_rules.h"
#include "nodessh/command.h"
#include "nodessh/login_proof.h"
#include "nodessh/monitor_protocol.h"
#include "nodessh/sandbox.h"
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
  Connection* connection;           // nullptr once the connection has gone
  Server::State* server = nullptr;  // the process's, which outlives every channel
  std::string peer;                 // the connection's, for the log
  ssh_channel channel;              // freed with the channel, or with its session
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
  bool banner_told = false;  // told to the listener (the connection is no longer idle)
  bool login_told = false;
  std::string drop;         // set: why the connection is to be closed
  std::string drop_reason;  // its kind, for the rate-limited log: "login grace", "auth tries"...
  void close_for(std::string reason, std::string why) {
    drop_reason = std::move(reason);
    drop = std::move(why);
  }
  std::vector<std::unique_ptr<Channel>> channels;
};

// The session process's link to its monitor (monitor.cpp): what it has read of the monitor's
// answers, the descriptors passed with them, and the groups of its commands not yet gone.
struct MonitorLink {
  int fd = -1;             // -1 once the monitor has gone
  bool monitored = false;  // false in a process with no monitor (a fuzzer's): commands start here
  std::uint32_t last_channel = 0;
  MonitorDecoder decoder{MonitorDecoder::Side::kSession};
  std::deque<int> passed_fds;
  std::vector<MonitorMessage> backlog;
  std::set<pid_t> live_groups;
  // An answer waited for in vain: a late one would be taken for the next request's (its
  // descriptors first in passed_fds), so no request is made after it.
  bool unanswered = false;
  // Reads what the monitor sent (waiting up to 10 s for something when `wait`); false once
  // the monitor has gone or broke the protocol.
  bool receive(bool wait);
  int take_fd();
};

// A connection process, as the listener sees it: its peer, and the pipe on which it tells
// what became of its connection (kReport*), read until its end.
struct ChildProcess {
  std::string peer;    // "10.0.0.5:51234", for the log
  std::string source;  // its address, for the admission's per-source bounds
  int report_fd = -1;
  std::string pending;  // a report line read in part
};

// A connection process made before its client (listener.cpp): its session process, in its
// sandbox, waits on `handoff_fd`'s other end for the accepted socket and its peer's address.
struct Spare {
  pid_t pid = -1;
  int handoff_fd = -1;  // the listener's end; closed once a socket is sent, or the spare goes
  int report_fd = -1;   // read as a ChildProcess's once it serves a connection
};

// What a connection process tells the listener, one line each: its client's banner came
// (it is no longer idle), it logged in, or a refusal for the listener's rate-limited log
// ("R" reason TAB line).
inline constexpr char kReportBanner = 'B';
inline constexpr char kReportLogin = 'A';
inline constexpr char kReportRefusal = 'R';

// How a connection process ends (its exit status), as OpenSSH's sshd-session tells sshd
// (EXIT_AUTH_ATTEMPTED 2, EXIT_LOGIN_GRACE 3): the listener's penalty comes from it.
int exit_status_of(Ending ending);
Ending ending_of(int wait_status);

struct Server::State {
  // Both: set before the first fork, read by every connection process.
  SshdOptions options;
  ssh_bind bind = nullptr;
  ssh_key job_public = nullptr;
  std::map<std::string, std::string> base_env;  // HOME
  int signal_fd = -1;
  rlimit descriptors_at_start{};  // the soft limit a connection process puts back
  // The monitors' check of a login, made once from job_public (none: a key type it cannot check).
  std::optional<LoginVerifier> login_verifier;
  std::optional<SessionFilter> session_filter;  // the session processes' sandbox, compiled once
  bool stopping = false;

  // The listener (listener.cpp).
  int listen_fd = -1;
  int port = 0;
  Admission admission{AdmissionLimits{}};
  std::map<pid_t, ChildProcess> children;
  std::optional<Clock::time_point> accept_paused_until;  // after an accept that failed
  std::optional<Spare> spare;                            // at most one, made before its client
  std::map<pid_t, int> unused_spares;                    // spares stopped unused: report pipes till reaped
  std::optional<Clock::time_point> next_spare_at;        // after a spare that ended unused
  rdv::RefusalLog refusals;  // one line per reason per 10 s: a stranger may refuse at line rate

  // A connection process (connection_process.cpp): its one connection, and its commands.
  int report_fd = -1;  // to the listener
  ssh_event event = nullptr;
  std::unique_ptr<Watch> signal_watch;
  std::unique_ptr<Connection> connection;
  // Channels whose connection has gone, kept until their command's group has ended.
  std::vector<std::unique_ptr<Channel>> orphans;
  std::map<pid_t, Channel*> by_pid;
  MonitorLink monitor;  // the session process's
  std::unique_ptr<Watch> monitor_watch;

  ~State();
};

// listener.cpp: the listening socket, and a connection process for each connection.
Expected<int> listen_on(SshdOptions options);

// "10.0.0.5:51234", "[fd00::5]:51234": a peer for the log.
std::string describe_peer(const sockaddr_storage& address);

// connection_process.cpp: a spare connection process (listener.cpp, make_spare): splits into
// its monitor and its sandboxed session process, which waits on `handoff` for one accepted
// socket, serves it, then ends the process.
[[noreturn]] void serve_connection_process(Server::State& state, int handoff);
// One turn of that process's loop, after each poll of state.event: its signals (when it
// watches them), the connection's turn (key exchange, deadlines at `now`, channels), the
// orphaned channels. False once the connection is over and every command's group has ended;
// `ending` then says how it ended. Apart from the process so that a fuzzer drives it in its own.
bool serve_turn(Server::State& state, Clock::time_point accepted_at, Clock::time_point now, Ending& ending);

// monitor.cpp: the connection's monitor, and the session process's requests to it. Each falls
// back to doing it here in a process with no monitor.
// One frame to the other side of the monitor's link, the descriptors with its first byte.
bool send_frame(int fd, const std::string& frame, const std::vector<int>& fds = {});
[[noreturn]] void run_monitor(Server::State& state, int link, pid_t session, int session_lines);
// In the listener, before any fork: state.login_verifier from state.job_public (logged if none).
void prepare_login_verifier(Server::State& state);
Expected<StartedCommand> start_through_monitor(Server::State& state, const Command& command,
                                               const TerminalSize& size);
void signal_group(Server::State& state, pid_t group, int signal);
// Before the sandbox: the session process will keep the signature libssh verifies next.
void arm_login_capture();
// After libssh accepted the job key's signature: whether the monitor, checking it itself,
// agrees (login_proof.h); `why` says why not.
bool login_confirmed(Server::State& state, std::string& why);
bool command_group_alive(const Server::State& state, pid_t group);

// server.cpp: libssh's bind, with the host key derived from the job key in
// state.options.ssh_dir and the algorithms mpi-sshd offers.
Status configure_bind(Server::State& state);

// connections.cpp: the connection's libssh session and its login.
// Makes the session for `fd` and starts its key exchange; false (logged) when libssh cannot.
bool start_session(Server::State& server, int fd, const sockaddr_storage& client, const std::string& peer,
                   Clock::time_point now);
// A line to the listener (report_fd); dropped rather than waited for when its pipe is full.
void report_to_listener(const Server::State& server, char kind, const std::string& text = "");

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
