// What a connection's monitor and its session process say to each other (monitor.cpp), as a
// pure engine: messages, their encoding, and a bounded decoder. The session process runs the
// client's SSH connection and cannot start a process (it has no right to: it parses a
// stranger's bytes); the monitor starts each command it asks for, passes back its
// descriptors (SCM_RIGHTS, beside the Started message), reaps it, and sends its signals;
// and it starts none before it has verified the client's login itself (LoginRequest,
// login_proof.h).
//
// The framing: each message is a uint32 length (big-endian) of what follows, a kind byte, and
// its fields, each a uint32, a byte, or a string (uint32 length, bytes). A stream socket
// carries them, since a command of 256 KiB with 64 env values of 32 KiB does not fit one
// datagram of a socket buffer an unprivileged process may set. Everything is bounded (the
// frame, the counts, each string) by what channel_rules.h lets a client ask, so that either
// side may take the other's bytes as hostile: a frame past a bound is an error, and the
// connection ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.h"
#include "nodessh/command.h"

namespace tmpi::nodessh {

// Session process -> monitor.
struct StartRequest {         // start a channel's command; answered by Started or StartFailed
  std::uint32_t channel = 0;  // the session process's own number for the channel
  Command command;            // argv, env (the client's accepted ones, SSH_CLIENT...), pty
  TerminalSize size;
};
struct SignalRequest {  // a signal to the process group of a command this monitor started
  std::int32_t pid = 0;
  std::int32_t signal = 0;
};

struct LoginRequest {  // the signed login libssh verified, for the monitor to verify itself
  std::string signed_blob;
  std::string signature;
};

// Monitor -> session process.
struct Started {  // the command runs; its descriptors travel with this message
  std::uint32_t channel = 0;
  std::int32_t pid = 0;
  bool pty = false;  // one descriptor (the pty's master), else three (stdin, stdout, stderr)
};
struct StartFailed {
  std::uint32_t channel = 0;
  std::string message;
};
struct Exited {  // waitpid's status for a command's pid
  std::int32_t pid = 0;
  std::int32_t status = 0;
};
struct GroupGone {  // no process of the command's group is left
  std::int32_t pid = 0;
};

struct LoginVerdict {  // the monitor's own check of a LoginRequest (login_proof.h)
  bool accepted = false;
  std::string reason;  // why not, for the log
};

using MonitorMessage = std::variant<StartRequest, SignalRequest, LoginRequest, Started, StartFailed, Exited,
                                    GroupGone, LoginVerdict>;

// The bounds: a command's argv and env as channel_rules.h bounds them, and room for framing.
inline constexpr std::size_t kMaxMonitorArgs = 8;
inline constexpr std::size_t kMaxMonitorEnv = 80;             // 64 accepted, TERM, SSH_CLIENT, SSH_CONNECTION
inline constexpr std::size_t kMaxMonitorString = 300 * 1024;  // a command of 256 KiB, with "-c"
inline constexpr std::size_t kMaxMonitorFrame = 4 * 1024 * 1024;

std::string encode_monitor_message(const MonitorMessage& message);

// Takes a stream's bytes in any cuts and gives whole messages back. Which kinds it accepts
// depends on the side: the monitor takes only requests, the session process only answers.
class MonitorDecoder {
 public:
  enum class Side { kMonitor, kSession };
  explicit MonitorDecoder(Side side) : side_(side) {}
  // Appends bytes; an error (a frame past its bound, a kind this side does not take, a field
  // that overruns its frame) leaves the decoder failed for good.
  Status feed(std::string_view bytes);
  // The next whole message, if any.
  std::optional<MonitorMessage> next();

 private:
  Side side_;
  std::string buffer_;
  std::vector<MonitorMessage> ready_;
  std::size_t taken_ = 0;
  bool failed_ = false;
};

}  // namespace tmpi::nodessh
