// See job_run.h. The attempt's steps in order: start (the coordinator, the status feed, the
// Events), before_launch (--wait, the preflight), launch (mpirun, and the ssh step beside it),
// supervise (each pass of Supervisor::step), verdict (failure.h's order of blame), then
// finish or end_attempt.
#include "launcher/job_run.h"

#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/rank_end.h"
#include "common/files.h"
#include "common/utf8.h"
#include "launcher/fabric_check.h"
#include "launcher/lost_host.h"
#include "launcher/preflight.h"
#include "launcher/report.h"
#include "launcher/supervise.h"
#include "launcher/trouble_keys.h"
#include "launcher/verdict.h"
#include "ssh/call.h"

namespace tmpi::launch {

using nlohmann::json;

namespace {

constexpr Millis kDaemonsEnd(5000);  // after mpirun's exit, for its daemons to end their ranks

}  // namespace

double seconds_since(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void tell_verdict(const json& report, const LauncherOptions& options) {
  std::vector<std::string> lines = verdict_lines(report, options.report);
  if (Status written = write_termination_message(options.termination_log, termination_message(lines));
      !written)
    spdlog::warn("the termination message not written: {}", written.error().message);
  for (const std::string& line : lines) spdlog::info("{}", line);
}

Status JobRun::start() {
  TMPI_CHECK(coordinator_.start());
  return ok_status();
}

// --wait, then the preflight (or the DNS alone, where MPI will say what fails).
Status JobRun::before_launch() {
  feed_.phase("WaitingForHosts", 0);
  auto since = Clock::now();
  auto ask_pods = [this](const std::vector<std::string>& hosts) { return events_.pods(hosts); };
  Status waited =
      plan_.wait_for_hosts ? wait_for_hosts(wait_options(options_), job_, shared_, ask_pods) : ok_status();
  phase_done("wait", since);
  if (!waited) return fail_before_launch(waited.error(), FailureKind::kRendezvousTimeout);
  if (!options_.preflight) {
    std::vector<CheckRow> unresolved;  // not checked without the preflight: MPI will say
    at_launch_ = resolve_hosts(job_.topology.host_names(), unresolved);
    return ok_status();
  }
  feed_.phase("Preflight", hosts());
  since = Clock::now();
  PreflightOptions preflight_settings = preflight_options(options_);
  if (!plan_.check_fabric) preflight_settings.fabric.check = FabricBackend::kNone;  // not in question
  Status checked = preflight(preflight_settings, job_, fabric_, preflight_steps_, at_launch_);
  end_strays();  // the fabric check's mpirun may leave an ssh to a host cut off, as the job's may
  phase_done("preflight", since);
  feed_.fabric(fabric_);
  if (!checked) return fail_before_launch(checked.error(), FailureKind::kPreflightFailed);
  return ok_status();
}

// A failure before any rank ran, kept for run(): the job's end, or a restart. Most messages name their
// troubleshooting key where they are made; the rest get their step's (mpirun not spawned: no MPI).
Error JobRun::fail_before_launch(const Error& error, FailureKind event) {
  const bool stopped = stop_requested();
  Trouble step = event == FailureKind::kPreflightFailed ? Trouble::kFabricCheckFailed : Trouble::kMpiNotFound;
  if (event == FailureKind::kRendezvousTimeout) step = Trouble::kHostNeverRegistered;
  Failure failure{stopped ? stop_code() : static_cast<int>(error.exit),
                  with_trouble(error.message, stopped ? Trouble::kJobStopped : step),
                  stopped ? FailureKind::kJobStopped : event};
  // The fabric check's own verdict (it ran, and wrote its report): a retest may clear it.
  failure.fabric = event == FailureKind::kPreflightFailed && !fabric_.is_null();
  early_failure_ = failure;
  // Said now, as verdict() says a failure after the launch: the verdict's lines, which come
  // last, are the log's last lines (`kubectl logs`, the kubelet's fallback message).
  spdlog::error("{}", failure.reason);
  return Error{job_exit(failure.code), failure.reason};
}

// The launcher's addresses as the preflight's DNS step found them, else as they resolve now
// (the agents, given none, are given the name, and say what they find).
std::vector<std::string> JobRun::launcher_addresses() const {
  auto found = at_launch_.find(job_.launcher_name);
  if (found != at_launch_.end() && !found->second.empty()) return found->second;
  std::vector<CheckRow> unresolved;
  return resolve_hosts({job_.launcher_name}, unresolved)[job_.launcher_name];
}

// MPI's ssh (mpi-ssh) runs over the check's connections where it can (ssh/relay.h).
void JobRun::start_relay() {
  if (job_.plan.ssh_agent == "ssh") return;
  auto started = SshRelay::start(job_.topology.host_names(), options_.job.ssh_port);
  if (started) {
    relay_ = std::move(*started);
  } else {
    spdlog::warn("{}; {}'s ssh makes its own connections", started.error().message, job_.plan.launcher);
  }
}

Status JobRun::launch() {
  spdlog::info("launching {} ranks ({}): {}", job_.plan.np, flavour_name(job_.plan.flavour),
               shell_join(command_));
  LaunchAddresses addresses{launcher_addresses(), coordinator_.listening_on(), options_.job.rendezvous_port,
                            std::nullopt};
  if (job_.start_gate) {
    start_relay();
    if (relay_) addresses.relay_socket = relay_->socket_path();
    ssh_beside_.emplace(job_, options_.job.ssh_port, relay_.get());
    daemons_prove_commands_ = ssh_beside_->daemons_prove_commands();
  }
  auto spawned = ProcessGroup::spawn(command_, launch_environment(job_, std::move(addresses)));
  if (!spawned) return fail_before_launch(spawned.error(), FailureKind::kJobFailed);
  mpi_ = *spawned;
  launched_ = Clock::now();
  return ok_status();
}

// The ssh step's verdict, from beside the launch: the gate opens, or the job stops.
void JobRun::ssh_verdict(const std::vector<CheckRow>& rows) {
  preflight_steps_.push_back({"ssh", ssh_beside_->seconds()});
  ssh_beside_.reset();
  // A check cut short by a stop signal left hosts unchecked, with no row: that is no pass.
  if (rows.empty() && stop_requested()) return coordinator_.stop_gate("the launcher was stopped");
  if (rows.empty()) return coordinator_.open_gate();
  Error failed = preflight_failed(rows);
  preflight_failure_ = Failure{static_cast<int>(failed.exit), failed.message, FailureKind::kPreflightFailed};
  coordinator_.stop_gate(failed.message);
  std::lock_guard lock(shared_.mutex);
  shared_.tally.failure = preflight_failure_;
}

// Where the daemons' start over the relay was the ssh check's proof that each account runs
// commands, a daemon that exited non-zero before any rank started fails the check, as its
// `exec true` would have: exit 69, the host and what its daemon printed (run_steps.h).
void JobRun::name_failed_daemons(const Ended& ended) {
  if (!relay_ || !daemons_prove_commands_ || preflight_failure_ || ended.failure || ended.status == 0 ||
      stop_requested() || tally().started > 0)
    return;
  std::vector<CheckRow> rows = daemon_start_rows(relay_->failed_starts(), ssh_login_user(), ended.at);
  if (rows.empty()) return;
  Error failed = preflight_failed(rows);
  preflight_failure_ = Failure{static_cast<int>(failed.exit), failed.message, FailureKind::kPreflightFailed};
}

// A lost host may be a container the kernel killed whole at its memory limit: the API, through
// the launcher pod's sidecar, says so once the kubelet has seen the container end
// (launcher/lost_host.h). Asked at most kLostPodAsks times; no API, or no word, keeps it lost.
void JobRun::ask_about_lost_host(std::optional<Failure>& failure) {
  if (!failure || failure->event != FailureKind::kHostLost || failure->host.empty()) return;
  const Millis between(kLostPodAskSpan.count() / (kLostPodAsks - 1));
  for (int ask = 0; ask < kLostPodAsks && !stop_requested(); ++ask) {
    if (ask > 0) std::this_thread::sleep_for(between);
    rdv::RelayedPods answer = events_.pods({failure->host});
    // No API to ask, or no pod of that name any more (deleted: no kill of its container to read).
    if (answer.outcome != rdv::RelayedPods::Outcome::kListed || answer.pods.empty() ||
        !answer.pods.front().found)
      return;
    if (answer.pods.front().ended.empty()) continue;  // not ended yet, as the kubelet saw it
    if (std::optional<Failure> out_of_memory = lost_host_out_of_memory(*failure, answer.pods.front()))
      failure = std::move(out_of_memory);
    return;
  }
}

// The snapshot is taken on the coordinator's thread, whose callbacks take the mutex: not under it.
void JobRun::record_timeout() {
  Failure timed_out = past_timeout(options_.timeout, coordinator_.snapshot()["ranks"]);
  std::lock_guard lock(shared_.mutex);
  if (!shared_.tally.failure) shared_.tally.failure = std::move(timed_out);
}

Ended JobRun::supervise() {
  feed_.phase("Running", hosts());
  Supervisor supervisor({job_.plan.np, options_.timeout, options_.grace}, job_.plan.launcher, *launched_);
  while (true) {
    if (std::optional<int> status = mpi_->poll()) return {std::nullopt, *status, Clock::now()};
    if (ssh_beside_) {
      if (auto rows = ssh_beside_->poll()) ssh_verdict(*rows);
    }
    JobTally seen = tally();
    // The reporter posts only what changed, at most once per --status-interval.
    feed_.ranks(seen.started - seen.exited, seen.failed, seen.failure ? seen.failure->reason : "");
    Decision decision =
        supervisor.step(seen, Clock::now(), stop_requested() ? std::optional(stop_code()) : std::nullopt);
    switch (decision.next) {
      case Decision::Next::kTimedOut:
        record_timeout();
        continue;  // the next step stops the job on it
      case Decision::Next::kEndLingering:
        spdlog::warn("{}", decision.says);
        mpi_->stop(decision.grace);
        return {std::nullopt, 0, Clock::now()};
      case Decision::Next::kStop:
        spdlog::error("{}", decision.says);
        return stop_job(decision);
      case Decision::Next::kWait:
        break;
    }
    std::this_thread::sleep_for(Millis(10));  // the job's end is noticed within 10 ms (bench row 1)
  }
}

// mpirun is stopped (SIGTERM to its group, SIGKILL after the grace), and the agents are told
// that the job is ending, before mpirun hears it: each asks at the SIGCONT that begins Open
// MPI's teardown of its rank, and ends the rank at once, where the daemon would send SIGTERM
// only a second later (agent/agent.cpp cites the source). The daemons may still sleep out
// that second before they exit, and mpirun, or verdict() after it, waits for them. A failure
// that will be restarted waits for neither once every rank has reported its end: mpirun is
// killed if it still runs, and the next attempt need not wait for daemons that hold no rank.
// Any other stop ends as before: mpirun's exit, then its daemons' (verdict()).
Ended JobRun::stop_job(const Decision& decision) {
  coordinator_.end_ranks();
  mpi_->signal(SIGTERM);
  const bool restart = decision.failure && plan_.restartable && plan_.restartable(*decision.failure);
  const auto kill_at = Clock::now() + decision.grace;
  std::optional<int> status;
  std::optional<Clock::time_point> exited_at;
  while (true) {
    if (!status && (status = mpi_->poll())) exited_at = Clock::now();
    if (restart && every_rank_ended(coordinator_.snapshot(), job_.plan.np)) {
      spdlog::debug("every rank has reported its end: {}'s daemons not waited for", job_.plan.launcher);
      if (!status) return {decision.failure, mpi_->stop(Millis(0)), Clock::now(), true};
      return {decision.failure, *status, *exited_at, true};
    }
    if (status &&
        (!restart || !relay_ || relay_->wait_idle(Millis(0)) || Clock::now() - *exited_at >= kDaemonsEnd))
      return {decision.failure, *status, *exited_at};
    if (!status && Clock::now() >= kill_at) return {decision.failure, mpi_->stop(Millis(0)), Clock::now()};
    std::this_thread::sleep_for(Millis(10));
  }
}

// What ended the job, once mpirun has: the ssh step's word, then failure.h's order of blame.
std::optional<Failure> JobRun::verdict(Ended ended) {
  phase_done("job", *launched_);
  if (ssh_beside_) ssh_verdict(ssh_beside_->wait());  // mpirun ended first: its verdict still decides
  name_failed_daemons(ended);
  // mpirun, stopped, may exit before its daemons have ended their ranks: they are waited for
  // (ssh/relay.h, wait_idle), except where a host is lost or its check failed (no daemon there
  // will answer, and the report would wait for nothing).
  bool unreachable = ended.failure && host_unreachable(*ended.failure);
  if (relay_ && !unreachable && !ended.ranks_ended && !relay_->wait_idle(kDaemonsEnd))
    spdlog::debug("ssh relay: a daemon still ran {} ms after {} exited", kDaemonsEnd.count(),
                  job_.plan.launcher);
  relay_.reset();  // mpirun is gone: every channel it left open closes now
  if (preflight_failure_) ended.failure = preflight_failure_;
  int strays = end_strays();  // said once the job's verdict is known (failure.h)
  JobTally seen = tally();
  JobOutcome outcome{ended.failure ? ended.failure : seen.failure, seen.secondary, ended.status,
                     job_.plan.launcher};  // a rank report that raced mpirun's exit counts
  std::optional<Failure> failure = attribute_failure(outcome, [&] {
    return find_lost_host(job_.topology.host_names(), at_launch_, options_.job.ssh_port, job_.private_key,
                          kLostHostBudget, stop_requested);
  });
  ask_about_lost_host(failure);
  if (std::string table = name_misplaced(failure, tally()); !table.empty()) std::cerr << table;
  report_strays(strays, failure.has_value(), job_.plan.launcher);
  if (failure) spdlog::error("{}", failure->reason);  // now, before the report and the status take their time
  return failure;
}

std::optional<Failure> JobRun::run() {
  if (!before_launch() || !launch()) return early_failure_;
  return verdict(supervise());
}

void JobRun::end_attempt(const Failure& failure, const std::string& restarting) {
  spdlog::warn("{}", restarting);
  events_.warn("RestartingInPlace", fmt::format("{}; {}", failure.reason, restarting));
  // A rank of this attempt still ending on a live host holds its GPU: the next attempt waits
  // for its agent's exit report, at most as long as the agents take to end a rank (mpirun's
  // grace, their orphan's grace, and a beat to hear the next attempt's 409). A lost host's
  // ranks report nothing: their agents end them when they hear no answer, or that 409.
  const Millis bound = options_.grace + kOrphanGrace + options_.rendezvous.times.beat_interval;
  const auto until = Clock::now() + bound;
  std::vector<int> running = ranks_running_on_live_hosts(coordinator_.snapshot());
  while (!running.empty() && Clock::now() < until && !stop_requested()) {
    std::this_thread::sleep_for(Millis(50));
    running = ranks_running_on_live_hosts(coordinator_.snapshot());
  }
  if (!running.empty())
    spdlog::warn(
        "{} rank(s) of this attempt (rank {} first) still ran {} s after it ended; the next begins anyway",
        running.size(), running.front(), bound.count() / 1000);
  // The sidecars keep their pods: they register again with the next attempt's coordinator,
  // whose session they learn from its challenge (a beat in this one's epoch is a 409 there).
  coordinator_.close();
}

// report.json, whichever way the job ends (a failed preflight too), then the sidecars' end.
void JobRun::finish(const std::optional<Failure>& failure, const std::vector<AttemptRecord>& attempts) {
  ReportParts parts{coordinator_.snapshot(),
                    failure ? std::vector<std::string>{} : expected_placement(job_.topology, job_.plan.np),
                    phases_json(phases_),
                    phases_json(preflight_steps_),
                    seconds_since(t0_),
                    command_,
                    fabric_};
  json report = job_report(std::move(parts), failure);
  report["attempts"] = attempts_json(attempts);
  feed_.finish(failure ? failure->code : 0, failure ? failure->reason : "");
  if (failure) events_.warn(std::string(event_reason(failure->event)), failure->reason);
  if (auto written = write_atomic(options_.report, dump_json(report, 2) + "\n"); !written) {
    spdlog::warn("report not written: {}", written.error().message);
  } else {
    spdlog::debug("report written to {}", options_.report);
  }
  // After a success the sidecars are served two more beats, to hear the end and exit 0.
  // After a failure the launcher exits at once: the JobSet's end deletes the node pods
  // (docs/trainer-rules.md: still-active Jobs are deleted when it finishes), and each
  // sidecar leaves on that SIGTERM; lingering only delayed the failure by 10 s.
  coordinator_.finish(options_.wait == WaitFor::kSidecar && !failure);
  feed_.wait();  // the final status was posted above, while the sidecars were told
  tell_verdict(report, options_);
}

}  // namespace tmpi::launch
