// What ended a job, decided from what the launcher saw, as a pure function that unit tests
// drive, apart from run_job's I/O.
//
// The order of blame: a primary cause (a rank that exited non-zero on its own, or a host
// the coordinator declared lost) wins; then, when mpirun failed or a rank was killed by a
// signal without a primary, a host that is gone now (asked only then: DNS and ssh cost
// seconds); then the rank killed by a signal, usually by MPI itself because of something
// else; then mpirun's own status. docs/design.md, "Failure attribution and teardown".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/choice.h"

namespace tmpi::launch {

// What kind of fault ended a job. The launcher's decisions read it (a lost host or a failed
// preflight ends the job at once), and the Warning Event on the TrainJob carries its name
// as the reason, the word that `kubectl get events --field-selector reason=...` and alert
// rules match, so the names are part of the interface (docs/design.md, Events).
enum class FailureKind {
  kJobFailed,          // mpirun's own status, or a launch that did not start
  kRankFailed,         // a rank exited non-zero, or was killed by a signal
  kRankMisplaced,      // a rank ran on another host than the hostfile gave it
  kHostLost,           // a node stopped beating, or no longer resolves or answers
  kPreflightFailed,    // a check before the launch refused a host
  kRendezvousTimeout,  // the nodes were not ready in time
  kJobStopped,         // the launcher was told to stop (SIGTERM: the pod is being deleted)
  kJobTimeout,         // the job ran past --timeout
};

inline constexpr Spellings<FailureKind, 8> kFailureKindSpellings{
    {{"JobFailed", FailureKind::kJobFailed},
     {"RankFailed", FailureKind::kRankFailed},
     {"RankMisplaced", FailureKind::kRankMisplaced},
     {"HostLost", FailureKind::kHostLost},
     {"PreflightFailed", FailureKind::kPreflightFailed},
     {"RendezvousTimeout", FailureKind::kRendezvousTimeout},
     {"JobStopped", FailureKind::kJobStopped},
     {"JobTimeout", FailureKind::kJobTimeout}}};

// The Event reason of a kind: "RankFailed", "HostLost", ...
constexpr std::string_view event_reason(FailureKind kind) {
  return choice_name(kind, kFailureKindSpellings);
}

struct Failure {
  int code = 1;
  std::string reason;
  FailureKind event = FailureKind::kJobFailed;  // what kind of fault; its name is the Event's reason
  // The code is the job's own (a rank's status, or mpirun's), passed through; otherwise it
  // is the launcher's (common/error.h). report.json's exit.side says which.
  bool from_job = false;
  // What an in-place restart asks of it (launcher/restarts.h): the signal that killed the
  // rank, whether its cgroup counted an OOM kill meanwhile, and whether the fabric check failed.
  int signal = 0;
  bool oom_killed = false;
  bool fabric = false;
  std::string host{};  // the lost host (kHostLost), whose pod the API may say more of (lost_host.h)
};

struct JobOutcome {
  std::optional<Failure> primary;    // the first rank that failed on its own, or a lost host
  std::optional<Failure> secondary;  // the first rank that was killed by a signal
  int mpirun_status = 0;             // as decode() gives it: 128+N for signal N
  std::string launcher;              // "mpirun", "prterun", "mpiexec.hydra": for the message
};

// The first host that no longer resolves or answers, and "host HOST is gone (why)".
struct GoneHost {
  std::string host, message;
};
using AskHosts = std::function<std::optional<GoneHost>()>;

// The job's failure, or nullopt when every rank exited 0. `ask_hosts` is called at most
// once, and only when neither a primary cause nor a clean exit explains the outcome.
std::optional<Failure> attribute_failure(const JobOutcome& outcome, const AskHosts& ask_hosts);

// report.json's "exit": {code, side, name, retry, reason}. side is "job" for a code of the
// user's job passed through, "launcher" for one of the table in common/error.h; name and
// retry come from that table ("job" and false for the job's own codes), so that a failure
// policy or a person can tell an infrastructure fault from a bug.
nlohmann::json exit_record(const std::optional<Failure>& failure);

// One rank of report.json's "ranks" (docs/design.md, report.json), built in one place: from
// its agent's reports, or, for a rank that exited 0 before its start was due to be reported
// (its agent sends nothing), from mpirun's exit 0 and the host the hostfile gave it.
struct RankRecord {
  int rank = -1;
  std::string host;
  bool exited = false;  // "exited", else "running"
  int code = 0, signal = 0;
  std::optional<double> seconds;  // null when unreported
  bool reported = false;
  bool left_processes = false;  // its exit report said processes it started still ran
};
nlohmann::json rank_json(const RankRecord& record);

// The job ran past --timeout: exit 75, naming the ranks still running (up to 8, then a count)
// from `ranks`, the coordinator's snapshot ([{rank, host, state}]), so that a hang (a
// deadlock, a stuck collective) is named where it is.
Failure past_timeout(Millis timeout, const nlohmann::json& ranks);

// The processes that mpirun left behind, once the launcher has ended them (common/process.h,
// end_strays). After a clean job they are routine: Open MPI's and hydra's ssh sessions run
// in process groups of their own and often outlive mpirun by a moment, so the line is for
// debug only (at info, users read it as a fault). After a failed job they may be part of
// the story (a daemon that hung, a host cut off), so they are said at info.
void report_strays(int strays, bool job_failed, std::string_view launcher);

}  // namespace tmpi::launch
