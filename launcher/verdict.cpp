// See verdict.h. Every field of the report is read with a default, since the report of a
// job that could not be set up holds less; text that came from outside (a rank's reason, a
// host's name) is cut and stripped of control bytes before it is a line. The reason keeps
// its troubleshooting note (launcher/trouble_keys.h) whole however long it is.
#include "launcher/verdict.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "common/json_fields.h"
#include "common/utf8.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;

constexpr std::size_t kReasonMax = 2048;
constexpr std::size_t kAttemptLinesMax = 4;

// One line: no newline or other control byte, whole UTF-8 characters, at most `max` bytes.
std::string one_line(std::string_view raw, std::size_t max) {
  std::string text = valid_utf8(raw);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return truncate_utf8(text, max, "...");
}

// "exit 75 (tempfail): the infrastructure's; the runtime restarts the job", from report.exit.
std::string whose_fault(const json& exit) {
  const std::int64_t code = int_at(exit, "/code", 0);
  const bool retry = bool_at(exit, "/retry", false);
  const std::string side = string_at(exit, "/side");
  std::string whose = retry           ? "the infrastructure's: the runtime restarts the job"
                      : side == "job" ? "the job's own: it is not retried"
                                      : "not the infrastructure's: it is not retried";
  return fmt::format("exit {} ({}), {}", code, one_line(string_at(exit, "/name"), 32), whose);
}

// "ranks: 1 of 4 failed (rank 1 on node-0: exit 3)", up to 4 named, from report.ranks. The
// ranks that SIGTERM ended (MPI's teardown, once another failed) are named after the others, so
// that the rank that failed of itself is never hidden behind the ones stopped for it.
std::string ranks_line(const json& ranks) {
  std::vector<std::string> failed, stopped;
  std::size_t exited = 0, total = 0;
  for (const json& rank : ranks) {
    if (!rank.is_object()) continue;
    ++total;
    if (string_at(rank, "/state") != "exited") continue;
    ++exited;
    const std::int64_t code = int_at(rank, "/code", 0), signal = int_at(rank, "/signal", 0);
    if (code == 0 && signal == 0) continue;
    // A rank ended by SIGTERM, or a shell that trapped it and exited 128+15, was stopped for another.
    (signal == SIGTERM || (signal == 0 && code == 128 + SIGTERM) ? stopped : failed)
        .push_back(
            fmt::format("rank {} on {}: {}", int_at(rank, "/rank", 0), one_line(string_at(rank, "/host"), 64),
                        signal != 0 ? fmt::format("signal {}", signal) : fmt::format("exit {}", code)));
  }
  failed.insert(failed.end(), stopped.begin(), stopped.end());
  for (std::size_t i = 4; i < failed.size(); ++i) failed[i].clear();  // counted, not named
  if (total == 0) return "ranks: none started";
  if (failed.empty())
    return fmt::format("ranks: {} of {} exited 0, {} running when it ended", exited, total, total - exited);
  std::string named;
  std::size_t shown = 0;
  for (const std::string& one : failed) {
    if (one.empty()) continue;
    named += (shown++ == 0 ? "" : "; ") + one;
  }
  if (failed.size() > shown) named += fmt::format("; and {} more", failed.size() - shown);
  return fmt::format("ranks: {} of {} failed ({})", failed.size(), total, named);
}

// "reason: ...", cut at kReasonMax with its troubleshooting note (trouble_keys.h) kept whole
// at the end, where a cut would have taken it: the key is what a person follows next.
std::string reason_line(const json& exit) {
  const std::string reason = string_at(exit, "/reason");
  const std::string key = one_line(string_at(exit, "/troubleshooting"), 64);
  std::string line = one_line(reason, kReasonMax);
  if (key.empty() || line.find(fmt::format("{}#{})", kTroublePage, key)) != std::string::npos)
    return "reason: " + line;
  const std::string note = fmt::format(" (see {}#{})", kTroublePage, key);
  return "reason: " + one_line(reason, kReasonMax - note.size()) + note;
}

// "attempt 0 failed after 41.2 s (HostLost: host ... lost); restarted in place, running again
// 6.3 s later", from one row of report.attempts (launcher/restarts.h).
std::string attempt_line(const json& attempt) {
  const std::string cause = one_line(string_at(attempt, "/cause"), 32);
  const json* failed_after = node_at(attempt, "/failedAfter");
  std::string line =
      fmt::format("attempt {} failed after {:.1f} s ({}{}{})", int_at(attempt, "/attempt", 0),
                  failed_after != nullptr && failed_after->is_number() ? failed_after->get<double>() : 0.0,
                  cause, cause.empty() ? "" : ": ", one_line(string_at(attempt, "/reason"), 200));
  if (bool_at(attempt, "/stopped", false)) return line + "; not restarted: the launcher was stopped";
  if (!bool_at(attempt, "/restarted", false))
    return line + (cause.empty() ? "; not restarted: not the infrastructure's" : "; no restart left");
  const json* resumed = node_at(attempt, "/resumedAfter");
  if (resumed != nullptr && resumed->is_number())
    return line + fmt::format("; restarted in place, running again {:.1f} s later", resumed->get<double>());
  return line + "; restarted in place";
}

}  // namespace

std::vector<std::string> verdict_lines(const json& report, const std::string& report_path) {
  static const json kNone = json::object();
  const json& exit =
      report.is_object() && report.contains("exit") && report["exit"].is_object() ? report["exit"] : kNone;
  const json& ranks = report.is_object() && report.contains("ranks") && report["ranks"].is_array()
                          ? report["ranks"]
                          : json::array();
  const auto seconds =
      exit.contains("seconds") && exit["seconds"].is_number() ? exit["seconds"].get<double>() : 0.0;
  std::vector<std::string> lines;
  if (int_at(exit, "/code", 0) == 0 && string_at(exit, "/name") == "ok") {
    lines.push_back(fmt::format("trainer-mpi: the job succeeded in {:.1f} s: every rank exited 0", seconds));
  } else {
    lines.push_back(
        fmt::format("trainer-mpi: the job failed after {:.1f} s: {}", seconds, whose_fault(exit)));
    lines.push_back(reason_line(exit));
  }
  // Each attempt that was restarted in place, and the last one's fate (launcher/restarts.h).
  const json* attempts = report.is_object() ? node_at(report, "/attempts") : nullptr;
  if (attempts != nullptr && attempts->is_array() && !attempts->empty()) {
    // The last few: every line of the message must fit the kubelet's 4 KiB.
    const std::size_t shown = std::min<std::size_t>(attempts->size(), kAttemptLinesMax);
    if (attempts->size() > shown)
      lines.push_back(fmt::format("{} earlier attempts: see the report", attempts->size() - shown));
    for (std::size_t i = attempts->size() - shown; i < attempts->size(); ++i)
      lines.push_back(attempt_line((*attempts)[i]));
  }
  lines.push_back(ranks_line(ranks));
  lines.push_back("report: " + one_line(report_path, 512) + " (every host, rank and phase)");
  return lines;
}

std::string termination_message(const std::vector<std::string>& lines) {
  std::string message;
  for (const std::string& line : lines) {
    const std::size_t room = kTerminationMessageMax - message.size();
    if (room <= 1) break;
    message += truncate_utf8(line, room - 1, "...") + "\n";
  }
  return message;
}

Status write_termination_message(const std::string& path, const std::string& message) {
  if (path.empty() || access(path.c_str(), F_OK) != 0) return ok_status();
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return make_error(Exit::kIo, "--termination-log {}: {}", path, std::strerror(errno));
  std::size_t done = 0;
  while (done < message.size()) {
    const ssize_t wrote = write(fd, message.data() + done, message.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const int error = errno;
      close(fd);
      return make_error(Exit::kIo, "--termination-log {}: {}", path, std::strerror(error));
    }
    done += static_cast<std::size_t>(wrote);
  }
  close(fd);
  return ok_status();
}

}  // namespace tmpi::launch
