// Logging: spdlog with one formatter of our own, which (1) writes plain lines by default
// or JSON lines on request (--log-format json), (2) redacts secrets from every line,
// whatever the call site passed: PEM private key blocks and bearer tokens never reach a log,
// and (3) makes every message safe to print, wherever its text came from (a host name in a
// request, a pod field, a rank's stderr): bounded in bytes, control characters and invalid
// UTF-8 escaped, and each line break followed by an indent, so that no text can forge a
// record of its own. All of it runs in linear time without recursion (a message is hostile
// input too: a regex engine that recurses per character overflowed the stack on 64 KB).
// Code logs with the plain spdlog calls (spdlog::info(...)).
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"
#include "common/params.h"

namespace tmpi::log {

// --log-format: plain lines, or JSON lines for a log pipeline (common/choice.h).
enum class LogFormat { kText, kJson };
inline constexpr Spellings<LogFormat, 2> kLogFormatSpellings{
    {{"text", LogFormat::kText}, {"json", LogFormat::kJson}}};

// Installs the stderr logger for `program` ("mpi-init") at `level` in `format`.
Status setup(std::string_view program, std::string_view level, LogFormat format);

// setup() from the registry's log-level and log-format, then one debug line per
// setting that the environment supplied.
Status setup_from(std::string_view program, const Params& params);

// Returns text with private keys and bearer tokens replaced by "[redacted]".
std::string redact(std::string_view text);

// The most bytes of one message that reach the log; the rest is counted, not printed.
inline constexpr std::size_t kMaxMessageBytes = 16 * 1024;
// What follows each line break inside a message: no continuation looks like a record.
inline constexpr std::string_view kContinuation = "    | ";

// The message as a text line shows it: redacted; at most kMaxMessageBytes of it; a line
// break followed by kContinuation; a tab as is; other control characters, DEL and bytes
// that are not valid UTF-8 as \xNN. Never throws.
std::string printable(std::string_view message);

}  // namespace tmpi::log
