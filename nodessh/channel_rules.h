// The rules of one session channel of mpi-sshd, with no I/O: what a client may ask of a
// channel (RFC 4254, section 6), and what the server does when the command, its output or the
// client ends. The server (nodessh/server.cpp) turns libssh's callbacks into calls here and
// carries out the actions it gets back; unit tests drive it with no socket and no process.
//
// The life of a channel: "pty-req" and "env" prepare it; "exec", "shell" or "subsystem sftp"
// starts its one command; "window-change" and "signal" reach the running command. The command's end is
// told (exit-status or exit-signal, as OpenSSH's session_exit_message words it), then EOF and
// close, once both its process has exited and its output has ended: a client that takes the
// status as the end has all the output by then. When the client goes first (a closed channel,
// a dropped connection, a failed keepalive; EOF on stdin is not going), the command's process
// group gets SIGHUP, and SIGKILL after the grace if it is still there: an MPI daemon must
// never outlive its mpirun. OpenSSH differs here (docs/design.md, "The node SSH server").
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace tmpi::nodessh {

enum class RequestKind {
  kPty,           // "pty-req": name = TERM
  kEnv,           // "env": name, value
  kExec,          // "exec": value = the command
  kShell,         // "shell"
  kWindowChange,  // "window-change"
  kSignal,        // "signal": name = the signal's name without SIG ("TERM")
  kSubsystem,     // "subsystem": name ("sftp"); value = the image's sftp-server, "" for none
  kX11,           // "x11-req"
  kAuthAgent,     // "auth-agent-req@openssh.com"
  kOther,         // anything else: name = the request's type
};

struct Request {
  RequestKind kind = RequestKind::kOther;
  std::string name;
  std::string value;
};

struct Verdict {
  bool accepted = false;
  std::string refusal;    // why not, for the log: names the request
  std::string to_client;  // a refusal a person must read: sent on the channel's stderr first
};

enum class ActionKind {
  kSignalGroup,     // number: the signal, to the command's process group
  kSendExitStatus,  // number: the status
  kSendExitSignal,  // text: the signal's name ("KILL"), number: 1 if it dumped core
  kSendEofAndClose,
  kHangupGroup,  // SIGHUP to the group: the client has gone
  kKillGroup,    // SIGKILL to the group: the grace after the hangup has passed
};

struct Action {
  ActionKind kind;
  int number = 0;
  std::string text;
  bool operator==(const Action&) const = default;
};

// Where distributions put OpenSSH's sftp-server, which runs on its own (no sshd): Debian and
// Ubuntu, RHEL and Fedora, Alpine, Arch. The server looks for it at each "subsystem sftp"
// request; the first found runs, as sshd runs the one its Subsystem line names.
inline constexpr std::array<std::string_view, 4> kSftpServerPaths{
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
    "/usr/lib/ssh/sftp-server",
};

// What the command is, once "exec", "shell" or "subsystem sftp" has been accepted.
struct Command {
  std::vector<std::string> argv;                         // /bin/sh -c CMD, /bin/sh -l, or sftp-server
  std::vector<std::pair<std::string, std::string>> env;  // accepted env requests, then TERM
  bool pty = false;
};

struct ChannelLimits {
  std::vector<std::string> accept_env;  // patterns, * and ? as sshd_config's AcceptEnv
  Millis hangup_grace{2000};
  std::size_t max_env = 64;                    // accepted env requests per channel
  std::size_t max_env_bytes = 32 * 1024;       // name and value of one
  std::size_t max_command_bytes = 256 * 1024;  // one exec's command
};

class ChannelRules {
 public:
  explicit ChannelRules(ChannelLimits limits) : limits_(std::move(limits)) {}

  // A request on the channel. An accepted "exec", "shell" or "subsystem sftp" makes command()
  // set: the server starts it, and calls command_failed() if it could not.
  Verdict on_request(const Request& request);
  // The "signal" request's action, after on_request accepted it.
  std::optional<Action> signal_action(const Request& request) const;
  const std::optional<Command>& command() const { return command_; }
  void command_failed() {
    command_.reset();
    exited_ = true;
  }

  // The command exited (a wait() status), or its output (stdout and stderr) has ended.
  std::vector<Action> on_exit(int wait_status);
  std::vector<Action> on_output_ended();
  // The client closed the channel, or its connection is gone.
  std::vector<Action> on_client_gone(Clock::time_point now);
  // Time passes; `group_alive`: whether any process of the command's group is left.
  std::vector<Action> on_tick(Clock::time_point now, bool group_alive);

  // Whether the channel is over: closed by us, or left by the client with no group to end.
  bool finished() const { return closed_ || (client_gone_ && !kill_at_); }
  bool has_pty() const { return pty_term_.has_value(); }

 private:
  Verdict before_start(const Request& request);
  Verdict start(const Request& request);
  Verdict subsystem(const Request& request) const;
  std::vector<Action> tell_end();

  ChannelLimits limits_;
  std::optional<std::string> pty_term_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::optional<Command> command_;
  bool exited_ = false;
  std::vector<Action> exit_told_;  // the exit's actions, held until the output has ended
  bool output_ended_ = false;
  bool closed_ = false;
  bool client_gone_ = false;
  std::optional<Clock::time_point> kill_at_;
};

// The bytes of the client's that libssh holds for a channel and the server has not taken yet
// (`held`): more than a client within its window could have sent (RFC 4254, section 5.2)
// says the client ignores the window, which libssh does not enforce (it takes a packet beyond
// the window "anyway": libssh 0.10 src/channels.c, channel_rcv_data), so nothing else would
// bound what it holds. libssh opens a channel's window to at most 1.28 MB at a time
// (WINDOWBASE there, topped up when below half of it), and the server takes all it holds at
// each read, so a client within its window never has 2 MB held; past kMaxClientBytesHeld, the
// reason to close the connection, as OpenSSH's sshd closes one whose client exceeds the
// window ("peer ignored channel window": openssh-portable channels.c, channel_input_data).
inline constexpr std::size_t kMaxClientBytesHeld = 4 * 1024 * 1024;
std::optional<std::string> window_ignored(std::size_t held);

// sshd_config's pattern match: * any run, ? any one character.
bool matches_pattern(std::string_view pattern, std::string_view text);
// RFC 4254 section 6.10's signal names ("TERM") and back; nullopt/"" for one it lacks.
std::optional<int> signal_number(std::string_view name);
std::string signal_name(int number);

}  // namespace tmpi::nodessh
