// libFuzzer target: mpi-sshd's own rules (nodessh/channel_rules.h, session_rules.h), driven
// as a client and the node could drive them: channel requests in any order with any payloads
// (names, env names and values, exec commands with NULs and invalid UTF-8, signals), and the
// command's exit, its output's end, the client's going and the clock, interleaved; logins too.
// The input is a program: one op byte, then its operands (a string is a length byte and that
// many bytes). Beside "no crash", it checks the rules' promises:
// - one command per channel, never replaced, as asked (the exec's bytes), within the bounds;
// - bounded state: accepted env within its count, size and the accepted patterns;
// - the exit is told once, only with the EOF and close, and only once the command has exited
//   and its output has ended; nothing is told once the client has gone;
// - the group is hung up once, killed only after the grace and only while it lives;
// - a login is accepted only for the job's key, signed, within its tries; refusals are short
//   and escaped (no control byte reaches the log).
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "nodessh/channel_rules.h"
#include "nodessh/session_rules.h"

namespace {

using namespace tmpi::nodessh;  // NOLINT(google-build-using-namespace): a fuzzer's own file

void check(bool holds) {
  if (!holds) std::abort();
}

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  std::uint8_t byte() { return empty() ? 0 : data_[at_++]; }
  std::string text() {
    std::size_t length = std::min<std::size_t>(byte(), size_ - std::min(at_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// Small bounds, so that the fuzzer reaches them.
const ChannelLimits kLimits{{"LANG", "LC_*", "OMPI_?X*"}, tmpi::Millis(2000), 4, 64, 128};

bool printable(const std::string& line) {
  return line.size() <= 600 &&
         std::none_of(line.begin(), line.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

// The harness's model of what has been told and done, to hold the rules' actions against.
struct Model {
  ChannelRules rules{kLimits};
  tmpi::Clock::time_point now{};
  std::optional<Command> started;  // the command as first accepted
  bool ever_started = false;
  bool exited = false;
  bool output_ended = false;
  bool closed = false;
  bool client_gone = false;
  std::optional<tmpi::Clock::time_point> hung_up_at;
  bool killed = false;
  bool group_ended = false;
  std::optional<Action> exit_action;  // what the exit must be told as
  bool was_finished = false;

  void check_command(const Request& request) {
    const auto& command = rules.command();
    if (!command) return;
    if (!started) {  // just started: only an accepted exec, shell or sftp may start one, once
      check(!ever_started && (request.kind == RequestKind::kExec || request.kind == RequestKind::kShell ||
                              request.kind == RequestKind::kSubsystem));
      ever_started = true;
      started = command;
      if (request.kind == RequestKind::kExec) {
        check(command->argv.size() == 3 && command->argv[2] == request.value);
        check(request.value.size() <= kLimits.max_command_bytes);
      }
      if (request.kind == RequestKind::kSubsystem) {  // sftp, and only a program of the list
        check(request.name == "sftp" && command->argv == std::vector<std::string>{request.value});
        check(std::find(kSftpServerPaths.begin(), kSftpServerPaths.end(), request.value) !=
              kSftpServerPaths.end());
      }
      check(command->env.size() <= kLimits.max_env + 1);
      for (const auto& variable : command->env) {
        const std::string& name = variable.first;
        if (name == "TERM" && command->pty) continue;
        check(name.size() + variable.second.size() <= kLimits.max_env_bytes);
        check(std::any_of(kLimits.accept_env.begin(), kLimits.accept_env.end(),
                          [&](const std::string& pattern) { return matches_pattern(pattern, name); }));
      }
    }
    check(command->argv == started->argv && command->env == started->env && command->pty == started->pty);
  }

  static Action expected_exit(int status) {
    if (!WIFSIGNALED(status)) return {ActionKind::kSendExitStatus, WEXITSTATUS(status), ""};
    std::string name = signal_name(WTERMSIG(status));
    if (name.empty()) return {ActionKind::kSendExitStatus, 128 + WTERMSIG(status), ""};
    return {ActionKind::kSendExitSignal, WCOREDUMP(status) ? 1 : 0, name};
  }

  void request(Input& in) {
    Request request{static_cast<RequestKind>(in.byte() % 10), in.text(), in.text()};
    const bool had_command = rules.command().has_value();
    Verdict verdict = rules.on_request(request);
    check(verdict.accepted == verdict.refusal.empty() && printable(verdict.refusal));
    if (request.kind == RequestKind::kSignal) {
      auto action = rules.signal_action(request);
      check(action.has_value() == verdict.accepted);
      if (action)
        check(action->kind == ActionKind::kSignalGroup && action->number == signal_number(request.name));
    }
    if (!verdict.accepted) check(rules.command().has_value() == had_command);
    check_command(request);
    // The server could not start it (fork failed): the channel has no command from then on.
    if (rules.command() && !had_command && (in.byte() & 1) != 0) {
      rules.command_failed();
      exited = true;
      started.reset();
    }
  }

  void told(const std::vector<Action>& actions, bool may_close) {
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      switch (action.kind) {
        case ActionKind::kSendExitStatus:
        case ActionKind::kSendExitSignal:
          // Told only right before the close, which comes last, and as the exit was.
          check(i + 2 == actions.size() && exit_action && action == *exit_action);
          break;
        case ActionKind::kSendEofAndClose:
          check(may_close && i + 1 == actions.size() && !closed && !client_gone);
          check(exited && output_ended);
          check(exit_action.has_value() == (actions.size() == 2));  // one exit told, if any
          closed = true;
          break;
        default:
          check(false);  // the exit and the output's end tell nothing else
      }
    }
  }

  void step(Input& in) {
    switch (in.byte() % 7) {
      case 0:
        request(in);
        break;
      case 1: {
        const int status = in.byte() | (in.byte() << 8);
        if (exited || !started) break;  // the server reaps only a started pid, once
        exited = true;
        exit_action = expected_exit(status);
        told(rules.on_exit(status), true);
        break;
      }
      case 2:
        output_ended = true;
        told(rules.on_output_ended(), true);
        break;
      case 3: {
        auto actions = rules.on_client_gone(now);
        const bool first = !client_gone && !closed;
        if (!closed) client_gone = true;
        // Hung up exactly when the client goes first from a channel whose command started.
        check(actions.empty() == !(first && started));
        check(actions.empty() || (actions.size() == 1 && actions[0].kind == ActionKind::kHangupGroup));
        if (!actions.empty()) hung_up_at = now;
        break;
      }
      case 4: {
        const bool alive = (in.byte() & 1) != 0;
        auto actions = rules.on_tick(now, alive);
        // Killed once, when (and only when) the grace has passed on a living group.
        const bool due =
            alive && hung_up_at && !killed && !group_ended && now >= *hung_up_at + kLimits.hangup_grace;
        check(actions.empty() == !due);
        check(actions.empty() || (actions.size() == 1 && actions[0].kind == ActionKind::kKillGroup));
        if (!actions.empty()) killed = true;
        if (hung_up_at && !alive) group_ended = true;
        break;
      }
      case 5:
        now += tmpi::Millis(in.byte() * 100);
        break;
      default:
        login(in);
    }
    check(!was_finished || rules.finished());
    was_finished = rules.finished();
  }

  // A connection's login, and the server's other pure checks, on the same input.
  static void login(Input& in) {
    LoginGate gate(tmpi::Clock::time_point{}, tmpi::Millis(20000), 1 + in.byte() % 8);
    bool last = false;
    bool accepted = false;
    for (int tries = in.byte() % 16; tries > 0; --tries) {
      const std::uint8_t how = in.byte();
      AuthVerdict verdict =
          (how & 4) != 0 ? gate.on_other_method() : gate.on_publickey((how & 1) != 0, (how & 2) != 0);
      check(verdict != AuthVerdict::kAccepted || (!last && !accepted && (how & 7) == 3));
      last = last || verdict == AuthVerdict::kDeniedLast;
      accepted = accepted || verdict == AuthVerdict::kAccepted;
    }
    check(gate.authenticated() == accepted);
    std::string pattern = in.text();
    if (check_accept_env({pattern}).ok()) (void)matches_pattern(pattern, in.text());
    check(printable(describe_refusal(Refused{in.byte() % 12, in.byte() % 8, ""})));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  Model model;
  for (int steps = 0; steps < 256 && !in.empty(); ++steps) model.step(in);
  return 0;
}
