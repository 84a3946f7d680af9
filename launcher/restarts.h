// Restarts in place (`mpi-launcher run --restarts N`): which failures are the infrastructure's
// and worth another attempt on the same pods, the budget that bounds them, and the record of
// each attempt for report.json, the log's last lines and the Events. Pure: run.cpp ends the
// attempt, waits for the hosts, runs the preflight again and launches; these decide whether.
//
// The rule (docs/design.md, "Restarts in place"), beside the exit codes:
// - a host lost (its beats stopped, its pod deleted or made again, its link down): restart;
// - a rank killed by SIGKILL or SIGBUS that no rank of the job sent (the kernel, the kubelet,
//   a person, a memory fault), unless its cgroup counted an OOM kill while it ran: restart;
// - the fabric check failed (a link that a retest may find healthy): restart;
// - a rank's own exit code: only when the user listed it (--retryable-exit-codes);
// - anything else (the program's failure, an OOM, a stop, --timeout, a misplaced rank, a
//   setup error): no restart, the job ends as it does without restarts.
// The budget counts restarts within --restart-window (Slurm's requeue and torchrun's
// --max-restarts count attempts; the window lets a weeks-long job survive a fault a day).
// Exhausted, the launcher ends with the last failure's own exit, so the JobSet's failure
// policy acts on it as it would have.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/choice.h"
#include "common/clock.h"
#include "common/error.h"
#include "launcher/failure.h"

namespace tmpi::launch {

struct RestartOptions {
  int restarts = 0;                  // --restarts: attempts after the first; 0 = none
  Millis window{0};                  // --restart-window: the budget counts restarts within it; 0 = ever
  std::vector<int> retryable_exits;  // --retryable-exit-codes: the program's own codes that restart
};

// --retryable-exit-codes' words, each a code 1..255; an error names the word and the fix.
Expected<std::vector<int>> parse_exit_codes(const std::vector<std::string>& words, std::string_view where);

// Why a failure is worth another attempt. The names are report.json's and the Events' "cause".
enum class RestartCause { kHostLost, kRankKilled, kFabricFault, kRetryableExit };
inline constexpr Spellings<RestartCause, 4> kRestartCauseSpellings{
    {{"HostLost", RestartCause::kHostLost},
     {"RankKilled", RestartCause::kRankKilled},
     {"FabricFault", RestartCause::kFabricFault},
     {"RetryableExit", RestartCause::kRetryableExit}}};

// The cause, or nullopt for a failure that is the program's own (or a stop, a timeout).
std::optional<RestartCause> restart_cause(const Failure& failure, const std::vector<int>& retryable_exits);

// Whether the next attempt runs the fabric check again: after a fault that may have left a
// link bad (a lost host, a new pod, a failed check), yes; after a killed rank or the
// program's listed code, the fabric was not in question.
bool recheck_fabric(RestartCause cause);

// The ranks of an attempt still running on a host that is not lost, from the coordinator's
// snapshot ({hosts: [{name, state}], ranks: [{rank, host, state}]}; an agent names its host by
// its short name): the next attempt waits for them, since a rank still ending holds its GPU.
std::vector<int> ranks_running_on_live_hosts(const nlohmann::json& snapshot);

// Whether every rank in [0, np) has reported its end (an exit, or its refusal to start where
// misplaced), from the same snapshot, and none said that processes it started still ran
// (`leftProcesses`: a shell's child, which its agent ends after the report). Each agent reports
// only once its rank is reaped, so then nothing of the attempt's ranks runs, whatever MPI's
// daemons still do: a restart need not wait for their teardown (Open MPI's holds each daemon a
// second: job_run.cpp). With leftovers, it waits for the daemons, which wait for the agents.
bool every_rank_ended(const nlohmann::json& snapshot, int np);

// N restarts within the window. `allows` before `spend`; the clock is injected.
class RestartBudget {
 public:
  explicit RestartBudget(const RestartOptions& options)
      : restarts_(options.restarts), window_(options.window) {}
  bool allows(Clock::time_point now) const;
  void spend(Clock::time_point now) { spent_.push_back(now); }
  int in_window(Clock::time_point now) const;

 private:
  int restarts_;
  Millis window_;
  std::vector<Clock::time_point> spent_;
};

// One attempt that failed and was restarted (or, last, the one that exhausted the budget).
struct AttemptRecord {
  int attempt = 0;                      // 0 for the first launch
  std::optional<RestartCause> cause;    // nullopt: not the infrastructure's
  int code = 0;                         // the attempt's exit, as it would have ended the job
  std::string reason;                   // the failure's one line
  double failed_after = 0;              // seconds from the launcher's start to the failure
  std::optional<double> resumed_after;  // seconds from the failure to the next launch, once it ran
  bool restarted = false;
  bool stopped = false;  // not restarted: the launcher was told to stop meanwhile
};

// report.json's "attempts": [{attempt, cause, code, reason, failedAfter, resumedAfter, restarted,
// stopped}].
nlohmann::json attempts_json(const std::vector<AttemptRecord>& attempts);

}  // namespace tmpi::launch
