// See channel_rules.h. Every refusal names the request and why, so that the server's log
// says what a client wanted and did not get.
#include "nodessh/channel_rules.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <csignal>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rendezvous/refusal_log.h"  // excerpt(): a name off the wire, short and escaped

namespace tmpi::nodessh {

namespace {

Verdict accept() {
  return Verdict{true, "", ""};
}

template <typename... Args>
Verdict refuse(fmt::format_string<Args...> format, Args&&... args) {
  return Verdict{false, fmt::format(format, std::forward<Args>(args)...), ""};
}

// RFC 4254, section 6.10: the names a "signal" or "exit-signal" carries.
constexpr std::array<std::pair<std::string_view, int>, 13> kSignals{{
    {"ABRT", SIGABRT},
    {"ALRM", SIGALRM},
    {"FPE", SIGFPE},
    {"HUP", SIGHUP},
    {"ILL", SIGILL},
    {"INT", SIGINT},
    {"KILL", SIGKILL},
    {"PIPE", SIGPIPE},
    {"QUIT", SIGQUIT},
    {"SEGV", SIGSEGV},
    {"TERM", SIGTERM},
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
}};

constexpr std::size_t kMaxTermBytes = 256;

bool plain_env_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string_view kind_name(RequestKind kind) {
  switch (kind) {
    case RequestKind::kPty:
      return "pty-req";
    case RequestKind::kEnv:
      return "env";
    case RequestKind::kExec:
      return "exec";
    case RequestKind::kSubsystem:
      return "subsystem";
    default:
      return "shell";
  }
}

}  // namespace

bool matches_pattern(std::string_view pattern, std::string_view text) {
  // Iterative glob with one backtrack point: linear in practice, no recursion.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<std::string> window_ignored(std::size_t held) {
  if (held <= kMaxClientBytesHeld) return std::nullopt;
  return fmt::format("the client ignored the channel's window: {} bytes held, more than the {} it may send",
                     held, kMaxClientBytesHeld);
}

std::optional<int> signal_number(std::string_view name) {
  for (const auto& [known, number] : kSignals) {
    if (known == name) return number;
  }
  return std::nullopt;
}

std::string signal_name(int number) {
  for (const auto& [known, value] : kSignals) {
    if (value == number) return std::string(known);
  }
  return "";
}

Verdict ChannelRules::on_request(const Request& request) {
  switch (request.kind) {
    case RequestKind::kX11:
      return refuse("x11-req refused: mpi-sshd forwards no X11");
    case RequestKind::kAuthAgent:
      return refuse("auth-agent-req refused: mpi-sshd forwards no agent");
    case RequestKind::kOther:
      return refuse("channel request {} refused: mpi-sshd does not know it", rdv::excerpt(request.name));
    case RequestKind::kWindowChange:
      if (!pty_term_) return refuse("window-change refused: the channel has no pty");
      return accept();
    case RequestKind::kSignal:
      if (!command_ || exited_)
        return refuse("signal {} refused: no command runs", rdv::excerpt(request.name));
      if (!signal_number(request.name))
        return refuse("signal {} refused: not a signal of RFC 4254", rdv::excerpt(request.name));
      return accept();
    default:
      break;
  }
  if (command_ || exited_)
    return refuse("{} refused: this channel's command has started", kind_name(request.kind));
  return before_start(request);
}

Verdict ChannelRules::before_start(const Request& request) {
  if (request.kind == RequestKind::kPty) {
    if (pty_term_) return refuse("pty-req refused: the channel has a pty already");
    if (request.name.size() > kMaxTermBytes)
      return refuse("pty-req refused: TERM longer than {} bytes", kMaxTermBytes);
    pty_term_ = request.name;
    return accept();
  }
  if (request.kind == RequestKind::kEnv) {
    if (!plain_env_name(request.name))
      return refuse("env {} refused: not a variable's name", rdv::excerpt(request.name));
    if (request.name.size() + request.value.size() > limits_.max_env_bytes)
      return refuse("env {} refused: longer than {} bytes", rdv::excerpt(request.name),
                    limits_.max_env_bytes);
    bool listed =
        std::any_of(limits_.accept_env.begin(), limits_.accept_env.end(),
                    [&](const std::string& pattern) { return matches_pattern(pattern, request.name); });
    if (!listed) return refuse("env {} refused: not in --sshd-accept-env", rdv::excerpt(request.name));
    auto same = [&](const auto& entry) { return entry.first == request.name; };
    std::erase_if(env_, same);
    if (env_.size() >= limits_.max_env)
      return refuse("env {} refused: {} variables already", rdv::excerpt(request.name), env_.size());
    env_.emplace_back(request.name, request.value);
    return accept();
  }
  return start(request);
}

// "subsystem sftp" runs the image's sftp-server, as sshd runs the program its Subsystem line
// names (openssh-portable session.c, session_subsystem_req); any other subsystem, or sftp in
// an image without one, is refused by name. Debian 12's scp speaks SFTP by default, and fails
// with only "Connection closed" where the subsystem is refused, so that refusal tells the
// person what does work: scp -O, the scp protocol, which is a plain exec.
Verdict ChannelRules::subsystem(const Request& request) const {
  if (request.name != "sftp")
    return refuse("subsystem {} refused: mpi-sshd serves only sftp", rdv::excerpt(request.name));
  const bool known =
      std::find(kSftpServerPaths.begin(), kSftpServerPaths.end(), request.value) != kSftpServerPaths.end();
  if (known) return accept();
  Verdict verdict = refuse("subsystem \"sftp\" refused: no sftp-server in this image (looked in {})",
                           fmt::join(kSftpServerPaths, ", "));
  verdict.to_client = fmt::format(
      "mpi-sshd: no sftp-server in this image (looked in {}), so sftp, and scp without -O, cannot run; "
      "scp -O copies over the scp protocol instead\n",
      fmt::join(kSftpServerPaths, ", "));
  return verdict;
}

Verdict ChannelRules::start(const Request& request) {
  Command command;
  if (request.kind == RequestKind::kSubsystem) {
    Verdict verdict = subsystem(request);
    if (!verdict.accepted) return verdict;
    command.argv = {request.value};
  } else if (request.kind == RequestKind::kExec) {
    if (request.value.size() > limits_.max_command_bytes)
      return refuse("exec refused: the command is longer than {} bytes", limits_.max_command_bytes);
    // As sshd runs a command for a user whose shell is /bin/sh (session.c, do_child).
    command.argv = {"/bin/sh", "-c", request.value};
  } else {
    // A person's shell, a login shell as sshd starts it; there is no passwd entry to name one.
    command.argv = {"/bin/sh", "-l"};
  }
  command.env = env_;
  if (pty_term_) {
    command.pty = true;
    if (!pty_term_->empty()) command.env.emplace_back("TERM", *pty_term_);
  }
  command_ = std::move(command);
  return accept();
}

std::optional<Action> ChannelRules::signal_action(const Request& request) const {
  auto number = signal_number(request.name);
  if (!number || !command_ || exited_) return std::nullopt;
  return Action{ActionKind::kSignalGroup, *number, ""};
}

std::vector<Action> ChannelRules::on_exit(int wait_status) {
  if (exited_) return {};
  exited_ = true;
  if (WIFSIGNALED(wait_status)) {
    std::string name = signal_name(WTERMSIG(wait_status));
    // A signal RFC 4254 does not name goes as the status a shell would show: 128+N.
    if (name.empty()) {
      exit_told_.push_back({ActionKind::kSendExitStatus, 128 + WTERMSIG(wait_status), ""});
    } else {
      exit_told_.push_back({ActionKind::kSendExitSignal, WCOREDUMP(wait_status) ? 1 : 0, name});
    }
  } else {
    exit_told_.push_back({ActionKind::kSendExitStatus, WEXITSTATUS(wait_status), ""});
  }
  return tell_end();
}

std::vector<Action> ChannelRules::on_output_ended() {
  output_ended_ = true;
  return tell_end();
}

std::vector<Action> ChannelRules::tell_end() {
  if (!exited_ || !output_ended_ || closed_ || client_gone_) return {};
  closed_ = true;
  std::vector<Action> actions = std::move(exit_told_);
  actions.push_back({ActionKind::kSendEofAndClose, 0, ""});
  return actions;
}

std::vector<Action> ChannelRules::on_client_gone(Clock::time_point now) {
  if (client_gone_ || closed_) return {};
  client_gone_ = true;
  // A command that has exited may have left a process holding its output open (a daemon in
  // the background): the group is hung up all the same.
  if (!command_) return {};
  kill_at_ = now + limits_.hangup_grace;
  return {{ActionKind::kHangupGroup, 0, ""}};
}

std::vector<Action> ChannelRules::on_tick(Clock::time_point now, bool group_alive) {
  if (!kill_at_) return {};
  if (!group_alive) {
    kill_at_.reset();
    return {};
  }
  if (now < *kill_at_) return {};
  kill_at_.reset();
  return {{ActionKind::kKillGroup, 0, ""}};
}

}  // namespace tmpi::nodessh
