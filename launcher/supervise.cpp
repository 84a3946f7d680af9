// See supervise.h.
#include "launcher/supervise.h"

#include <algorithm>
#include <csignal>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

void record_host_lost(JobTally& tally, const std::string& host, const std::string& why) {
  if (tally.failure) return;
  tally.failure = Failure{static_cast<int>(Exit::kTempFail),
                          fmt::format("host {} lost ({}){}", host, why, trouble_note(Trouble::kHostLost)),
                          FailureKind::kHostLost};
  tally.failure->host = host;
}

namespace {

// A rank that ran elsewhere than the hostfile says was not started: it counts as exited and
// failed, and the first one stops the job.
void record_misplaced(JobTally& tally, const rdv::RankEvent& event) {
  ++tally.exited;
  ++tally.failed;
  if (tally.misplaced.size() < kMaxMisplacedRows)
    tally.misplaced.push_back(misplaced_row(event.rank, event.host, event.expected));
  if (++tally.misplaced_count == 1 && !tally.failure)
    tally.failure = Failure{static_cast<int>(Exit::kUnavailable),
                            fmt::format("rank {} ran on {}, not on {} as the hostfile says{}", event.rank,
                                        event.host, event.expected, trouble_note(Trouble::kRankMisplaced)),
                            FailureKind::kRankMisplaced};
}

// SIGKILL is what the kernel's OOM killer sends (and what a container over its memory limit
// gets). The rank's agent counts its cgroup's OOM kills (agent/oom.h): a rise is named the
// OOM killer's, a count that did not rise names a kill from outside the job (the kubelet, a
// person, a preemption), and where no count could be read it stays a possibility.
std::string rank_exit_reason(const rdv::RankEvent& event) {
  constexpr int kSigKill = 9;
  if (event.oom_killed)
    return fmt::format(
        "rank {} on {} was killed by the kernel's OOM killer after {:.0f} s: its pod's memory cgroup counted "
        "an "
        "OOM kill{}; give the pod more memory, or the rank less to hold{}",
        event.rank, event.host, event.seconds,
        event.memory_limit > 0 ? fmt::format(" at its limit of {} MiB", event.memory_limit >> 20)
                               : std::string(),
        trouble_note(Trouble::kRankOutOfMemory));
  if (event.signal == kSigKill && event.oom_counted)
    return fmt::format(
        "rank {} on {} was killed by signal 9 (SIGKILL) from outside the job after {:.0f} s: its "
        "memory cgroup counted no OOM kill, so the kubelet, a person or a preemption sent it{}",
        event.rank, event.host, event.seconds, trouble_note(Trouble::kRankKilled));
  if (event.signal == kSigKill)
    return fmt::format("rank {} on {} was killed by signal 9 (SIGKILL: out of memory?) after {:.0f} s{}",
                       event.rank, event.host, event.seconds, trouble_note(Trouble::kRankOutOfMemory));
  if (event.signal != 0)
    return fmt::format("rank {} on {} was killed by signal {} after {:.0f} s{}", event.rank, event.host,
                       event.signal, event.seconds, trouble_note(Trouble::kRankKilled));
  return fmt::format("rank {} on {} exited with code {} after {:.0f} s{}", event.rank, event.host, event.code,
                     event.seconds, trouble_note(Trouble::kRankFailed));
}

// SIGKILL or SIGBUS before anything else failed is no teardown's (MPI ends ranks with SIGTERM
// first, and only once something failed): the kernel, the kubelet or a person killed the rank,
// and the peers' errors that follow (a torch collective's "connection reset", exit 1) are
// its consequence, not the cause.
bool killed_first(const JobTally& tally, const rdv::RankEvent& event) {
  return (event.signal == SIGKILL || event.signal == SIGBUS) && !tally.failure && !tally.secondary;
}

bool record_exit(JobTally& tally, const rdv::RankEvent& event) {
  ++tally.exited;
  if (event.code == 0) return false;
  ++tally.failed;
  auto& slot = event.signal != 0 && !killed_first(tally, event) ? tally.secondary : tally.failure;
  if (slot) return false;
  slot = Failure{event.code, rank_exit_reason(event), FailureKind::kRankFailed, true};
  slot->signal = event.signal;
  slot->oom_killed = event.oom_killed;
  return true;
}

}  // namespace

bool record_rank_event(JobTally& tally, const rdv::RankEvent& event) {
  switch (event.event) {
    case rdv::RankEventKind::kStart:
      ++tally.started;
      return false;
    case rdv::RankEventKind::kMisplaced:
      record_misplaced(tally, event);
      return false;
    case rdv::RankEventKind::kExit:
      return record_exit(tally, event);
  }
  return false;
}

bool host_unreachable(const Failure& failure) {
  return failure.event == FailureKind::kHostLost || failure.event == FailureKind::kPreflightFailed;
}

Supervisor::Supervisor(const SupervisionOptions& options, std::string launcher, Clock::time_point launched)
    : options_(options), launcher_(std::move(launcher)), launched_(launched) {}

Decision Supervisor::step(const JobTally& tally, Clock::time_point now, std::optional<int> stop_code) {
  if (tally.failure) return stop(*tally.failure, tally);
  if (options_.timeout.count() > 0 && now - launched_ >= options_.timeout)
    return {Decision::Next::kTimedOut, std::nullopt, options_.grace, ""};
  // Every rank has reported its exit 0, yet mpirun runs on (prterun 5.0.7 was seen to, under
  // load): after kMpirunLinger it is ended, and the job is what its ranks said it was.
  if (tally.exited >= options_.np && tally.failed == 0 && !tally.secondary) {
    if (!all_exited_at_) all_exited_at_ = now;
    if (now - *all_exited_at_ >= kMpirunLinger)
      return {Decision::Next::kEndLingering, std::nullopt, options_.grace,
              fmt::format("every rank exited 0, but {} did not exit {} s later; ending it", launcher_,
                          kMpirunLinger.count() / 1000)};
  }
  if (stop_code) {
    return stop(Failure{*stop_code,
                        fmt::format("stopped by signal {} (the pod is being deleted?){}", *stop_code - 128,
                                    trouble_note(Trouble::kJobStopped)),
                        FailureKind::kJobStopped},
                tally);
  }
  return {};
}

Decision Supervisor::stop(const Failure& failure, const JobTally& tally) const {
  Decision decision{Decision::Next::kStop, failure, options_.grace, ""};
  if (failure.event == FailureKind::kPreflightFailed) {
    decision.says = fmt::format("{}; stopping {}", failure.reason, launcher_);
  } else {
    // "Other" only beside a rank that failed itself: a timeout or a lost host stops them all.
    int left = std::max(0, options_.np - tally.exited);
    const char* other = failure.event == FailureKind::kRankFailed ? "other " : "";
    decision.says =
        fmt::format("{}; stopping {} {}rank{}", failure.reason, left, other, left == 1 ? "" : "s");
  }
  // A lost host's daemon cannot pass mpirun's SIGTERM on, so the whole grace (10 s by
  // default) would only delay the report: a job with a lost host gets at most 3 s; so does
  // one whose ssh check failed (no rank runs, and a host may not answer).
  if (host_unreachable(failure)) decision.grace = std::min(decision.grace, kLostHostGrace);
  return decision;
}

std::string name_misplaced(std::optional<Failure>& failure, const JobTally& tally) {
  if (tally.misplaced.empty() || !failure || failure->event != FailureKind::kRankMisplaced) return "";
  std::string table = render_table(tally.misplaced);
  if (tally.misplaced_count > static_cast<int>(tally.misplaced.size()))
    table += fmt::format("... and {} more\n", tally.misplaced_count - tally.misplaced.size());
  failure->reason = fmt::format(
      "placement: {} rank(s) ran elsewhere than the hostfile says, and were not started; the job was "
      "stopped (see the table above){}",
      tally.misplaced_count, trouble_note(Trouble::kRankMisplaced));
  return table;
}

}  // namespace tmpi::launch
