// One attempt of `mpi-launcher run`, from the coordinator's start to its verdict: readiness
// (--wait) -> preflight -> launch -> supervision -> verdict. run.cpp makes one per attempt
// (launcher/restarts.h): it either finishes the job with the last one (report.json, the
// status, the Events, the sidecars told), or ends the attempt and makes the next.
//
// The coordinator runs on its own I/O thread from the start: it is the sidecars' barrier, it
// hears every rank agent, and it keeps the agents' start gate while the ssh step runs beside
// the launch. Its callbacks only fold facts into the JobTally under a mutex; the main thread
// copies it each pass and acts on what Supervisor::step decides (tears the job down on the
// first failed rank, a lost host, or a failed check). Internal to run.cpp and job_run.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/process.h"
#include "launcher/failure.h"
#include "launcher/job.h"
#include "launcher/job_events.h"
#include "launcher/job_rendezvous.h"
#include "launcher/options.h"
#include "launcher/preflight.h"
#include "launcher/restarts.h"
#include "launcher/run_steps.h"
#include "launcher/status_feed.h"
#include "ssh/relay.h"

namespace tmpi::launch {

double seconds_since(Clock::time_point since);

// The verdict, last: the termination message for `kubectl describe pod`, and the closing
// lines of the log (launcher/verdict.h).
void tell_verdict(const nlohmann::json& report, const LauncherOptions& options);

// How mpirun ended: the failure that stopped it (nullopt when it exited on its own), and its status.
struct Ended {
  std::optional<Failure> failure;
  int status = 0;
  Clock::time_point at;  // when mpirun's exit was seen
  // Every rank had reported its end, the failure was to be restarted, and mpirun was killed
  // rather than waited for: its daemons may still be ending, with no rank left under them.
  bool ranks_ended = false;
};

// What an attempt is: its number, and whether its preflight runs the fabric check (the first
// does, as --check says; a restart only after a fault that may have left a link bad).
struct AttemptPlan {
  int number = 0;
  bool check_fabric = true;
  // Whether it waits for every host again (--wait): after a lost host, yes. After a fault that
  // named no host, the hosts are as they were; waiting for the sidecars to learn the new
  // session would cost up to a beat (5 s) for nothing, and the preflight's ssh step checks
  // every host's server anyway.
  bool wait_for_hosts = true;
  // Whether a failure would be restarted in place (the cause, and the budget): then, once every
  // rank has reported its end, MPI's own teardown is not waited for (JobRun::stop_job).
  std::function<bool(const Failure&)> restartable;
};

// Not movable: the coordinator's callbacks hold its tally, the ssh step beside the launch its
// relay. Members end in reverse: the ssh check before the relay it hands sessions to, both
// before the coordinator.
class JobRun {
 public:
  JobRun(const LauncherOptions& options, Job job, Clock::time_point t0, AttemptPlan plan, StatusFeed& feed,
         JobEvents& events)
      : options_(options),
        job_(std::move(job)),
        t0_(t0),
        plan_(std::move(plan)),
        command_(build_command(job_.plan)),
        coordinator_(options.rendezvous, job_, shared_),
        feed_(feed),
        events_(events) {}
  JobRun(const JobRun&) = delete;
  JobRun& operator=(const JobRun&) = delete;

  const std::vector<std::string>& command() const { return command_; }
  Status start();
  // The attempt's failure, or nullopt when every rank exited 0.
  std::optional<Failure> run();
  std::optional<Clock::time_point> launched_at() const { return launched_; }
  // A failure that is restarted in place: said as an Event; the sidecars are not told that the
  // job ended (they register again in the next attempt's session), and no report is written.
  void end_attempt(const Failure& failure, const std::string& restarting);
  // report.json (with every attempt), the status, the Events, the sidecars told; then the verdict.
  void finish(const std::optional<Failure>& failure, const std::vector<AttemptRecord>& attempts);

 private:
  int hosts() const { return static_cast<int>(job_.topology.hosts.size()); }
  void phase_done(const char* name, Clock::time_point since) {
    phases_.push_back({name, seconds_since(since)});
  }
  Status before_launch();
  Status launch();
  Ended supervise();
  Ended stop_job(const Decision& decision);
  std::optional<Failure> verdict(Ended ended);
  Error fail_before_launch(const Error& error, FailureKind event);
  std::vector<std::string> launcher_addresses() const;
  void start_relay();
  void ssh_verdict(const std::vector<CheckRow>& rows);
  void name_failed_daemons(const Ended& ended);
  void ask_about_lost_host(std::optional<Failure>& failure);
  JobTally tally() {
    std::lock_guard lock(shared_.mutex);
    return shared_.tally;
  }
  void record_timeout();

  const LauncherOptions& options_;
  Job job_;
  Clock::time_point t0_;
  std::optional<Clock::time_point> launched_;
  AttemptPlan plan_;
  std::vector<std::string> command_;
  Shared shared_;
  JobRendezvous coordinator_;
  StatusFeed& feed_;  // both the run's, across its attempts (one reporter, one TrainJob lookup)
  JobEvents& events_;
  std::vector<Phase> phases_, preflight_steps_;
  nlohmann::json fabric_;
  // Where each host was when its ranks started: a host whose name resolves elsewhere after a
  // failure was recreated (find_lost_host), whether or not its new pod registered first.
  HostAddresses at_launch_;
  // The ssh step beside the launch (run_steps.h): its verdict opens the agents' start gate,
  // or stops the job, as its failure before the launch would have (exit 69, the table). The
  // preflight's word wins over what mpirun made of the same fault (an sshd that refuses it).
  std::unique_ptr<SshRelay> relay_;
  std::optional<SshCheckBeside> ssh_beside_;
  bool daemons_prove_commands_ = false;  // the check left its `exec true` to the daemons' start
  std::optional<Failure> preflight_failure_;
  std::optional<Failure> early_failure_;  // before the launch: fail_before_launch's
  std::optional<ProcessGroup> mpi_;
};

}  // namespace tmpi::launch
