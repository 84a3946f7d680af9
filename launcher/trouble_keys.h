// The troubleshooting keys: every message that can end a failed job names one, so that a
// person who reads it in `kubectl describe pod` or the log's last lines finds its symptom,
// cause and fix in docs/troubleshooting.md, whose section anchors are these keys.
//
// One form everywhere: the message ends with " (see docs/troubleshooting.md#KEY)", added
// where the message is made (trouble_note). The text is what travels (Error, Failure, the
// Event, the status, the log), so nothing else carries the key: report.json's
// exit.troubleshooting is read back from the reason (trouble_key_in), and the verdict keeps
// the note whole when it cuts a long reason. The keys are stable (users and alert rules link
// them), kebab-case, and unit_tests `TroubleKeys.*` holds this table and the page to one set.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace tmpi::launch {

enum class Trouble {
  kHostNotScheduled,
  kHostNotRunning,
  kHostNeverRegistered,
  kHostNotReady,
  kHostUnresolved,
  kSshRefused,
  kRankMisplaced,
  kFabricCheckFailed,
  kNcclMissing,
  kRankFailed,
  kRankKilled,
  kRankOutOfMemory,
  kHostLost,
  kMpirunFailed,
  kMpiNotFound,
  kBundleMissing,
  kJobTimeout,
  kJobStopped,
  kSetupFailed,
};

struct TroubleEntry {
  Trouble trouble;
  std::string_view key;    // the page's anchor
  std::string_view title;  // the page's heading, after the key
};

inline constexpr std::array<TroubleEntry, 19> kTroubleTable{{
    {Trouble::kHostNotScheduled, "host-not-scheduled",
     "a host's pod was never scheduled (Pending, Unschedulable)"},
    {Trouble::kHostNotRunning, "host-not-running",
     "a host's pod was made, but never ran (an image, a config)"},
    {Trouble::kHostNeverRegistered, "host-never-registered", "a host's pod runs, but never registered"},
    {Trouble::kHostNotReady, "host-not-ready", "a host registered, but its SSH server was not ready"},
    {Trouble::kHostUnresolved, "host-unresolved", "a host's name does not resolve"},
    {Trouble::kSshRefused, "ssh-refused", "ssh to a host was refused"},
    {Trouble::kRankMisplaced, "rank-misplaced", "a rank ran elsewhere than the hostfile says"},
    {Trouble::kFabricCheckFailed, "fabric-check-failed", "the fabric check named a host or link"},
    {Trouble::kNcclMissing, "nccl-missing", "the image has no NCCL (nccl-check exit 78)"},
    {Trouble::kRankFailed, "rank-failed", "a rank exited non-zero"},
    {Trouble::kRankKilled, "rank-killed", "a rank was killed by a signal"},
    {Trouble::kRankOutOfMemory, "rank-out-of-memory",
     "a rank was killed by the OOM killer (or SIGKILL: out of memory?)"},
    {Trouble::kHostLost, "host-lost", "a host was lost while the job ran"},
    {Trouble::kMpirunFailed, "mpirun-failed", "mpirun failed and no rank said why"},
    {Trouble::kMpiNotFound, "mpi-not-found", "the image has no MPI the launcher can run"},
    {Trouble::kBundleMissing, "bundle-missing", "trainer-mpi's programs are not in the pod"},
    {Trouble::kJobTimeout, "job-timeout", "the job ran past --timeout"},
    {Trouble::kJobStopped, "job-stopped", "the launcher was stopped by a signal"},
    {Trouble::kSetupFailed, "setup-failed", "the job could not be set up"},
}};

inline constexpr std::string_view kTroublePage = "docs/troubleshooting.md";

constexpr std::string_view trouble_key(Trouble trouble) {
  for (const TroubleEntry& entry : kTroubleTable)
    if (entry.trouble == trouble) return entry.key;
  return "setup-failed";
}

// " (see docs/troubleshooting.md#KEY)": the one form every message ends with.
inline std::string trouble_note(Trouble trouble) {
  return " (see " + std::string(kTroublePage) + "#" + std::string(trouble_key(trouble)) + ")";
}

// The key of the last note in `text` that names a key of the table, else nullopt: a message
// built on another (a stop that says what it stopped) answers for the cause it ends with.
inline std::optional<std::string_view> trouble_key_in(std::string_view text) {
  const std::string prefix = " (see " + std::string(kTroublePage) + "#";
  for (std::size_t at = text.rfind(prefix); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : text.rfind(prefix, at - 1)) {
    const std::string_view rest = text.substr(at + prefix.size());
    for (const TroubleEntry& entry : kTroubleTable)
      if (rest.substr(0, entry.key.size() + 1) == std::string(entry.key) + ")") return entry.key;
  }
  return std::nullopt;
}

// `message` with the note of `fallback` where it names no key yet.
inline std::string with_trouble(std::string message, Trouble fallback) {
  if (!trouble_key_in(message)) message += trouble_note(fallback);
  return message;
}

}  // namespace tmpi::launch
