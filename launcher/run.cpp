// `mpi-launcher run`: the job prepared once, then attempts (launcher/job_run.h: readiness,
// preflight, launch, supervision, verdict) until one ends it: it succeeded, it failed in a
// way that is not the infrastructure's, or the restart budget is spent (launcher/restarts.h).
// Each restart is in place: the same pods, a new session (epoch) for the rendezvous, the
// attempt's number in every rank's environment, the hosts waited for again (a pod made again
// under its name too), the preflight's steps that the fault calls for, then the launch.
// `check` is the preflight alone.
#include "launcher/run.h"

#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/files.h"
#include "common/json_fields.h"
#include "common/process.h"
#include "common/utf8.h"
#include "launcher/failure.h"
#include "launcher/job.h"
#include "launcher/job_events.h"
#include "launcher/job_run.h"
#include "launcher/preflight.h"
#include "launcher/restarts.h"
#include "launcher/run_steps.h"
#include "launcher/status_feed.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;

// report.json when the job cannot even be set up (no hosts.json or job key, the
// coordinator's port taken): the exit alone, so that every way out of `run` leaves a report.
Error report_setup_failure(const LauncherOptions& options, const std::vector<std::string>& command,
                           Clock::time_point t0, Error error) {
  error.message = with_trouble(std::move(error.message), Trouble::kSetupFailed);
  json report = {
      {"hosts", json::array()},
      {"ranks", json::array()},
      {"phases", json::array()},
      {"exit", exit_record(Failure{static_cast<int>(error.exit), error.message, FailureKind::kJobFailed})},
      {"command", command}};
  report["exit"]["seconds"] = seconds_since(t0);
  if (auto written = write_atomic(options.report, dump_json(report, 2) + "\n"); !written)
    spdlog::warn("report not written: {}", written.error().message);
  spdlog::error("{}", error.message);  // said here, before the verdict's lines, not again at exit
  tell_verdict(report, options);
  return Error{error.exit, ""};
}

// The failed attempt's row; then, where its cause is the infrastructure's and the budget
// allows, the attempt ends in place and the next one is made. Returns whether to go on.
bool restart_after(JobRun& run, const Failure& failure, const RestartOptions& options, RestartBudget& budget,
                   std::vector<AttemptRecord>& attempts, int attempt, Clock::time_point t0) {
  std::optional<RestartCause> cause = restart_cause(failure, options.retryable_exits);
  AttemptRecord row{attempt, cause, failure.code, failure.reason, seconds_since(t0), std::nullopt, false};
  row.stopped = cause && stop_requested();
  row.restarted = cause && !row.stopped && budget.allows(Clock::now());
  // With no restarts asked for, the report's list stays empty: the exit says it all.
  if (options.restarts > 0) attempts.push_back(row);
  if (!row.restarted) return false;
  budget.spend(Clock::now());
  run.end_attempt(failure, fmt::format("attempt {} failed ({}); restarting in place: restart {} of {}{}",
                                       attempt, choice_name(*cause, kRestartCauseSpellings),
                                       budget.in_window(Clock::now()), options.restarts,
                                       options.window.count() > 0
                                           ? fmt::format(" within {} s", options.window.count() / 1000)
                                           : std::string()));
  return true;
}

}  // namespace

Status check_job(const LauncherOptions& options) {
  JobOptions job_options = options.job;
  job_options.start_gate = false;  // the ssh step runs here, before any launch
  TMPI_ASSIGN(Job job, prepare_job(job_options, {"true"}));
  job.probe_placement = true;  // no rank of a job is to check it here
  // As in run: what the probe's or the fabric check's mpirun leaves (an ssh to a host cut off
  // mid-check, in a process group of its own) is adopted, and ended before `check` returns.
  adopt_orphans();
  struct EndStrays {
    ~EndStrays() { end_strays(); }
  } end_strays_at_return;
  json fabric;
  std::vector<Phase> steps;
  HostAddresses addresses;
  TMPI_CHECK(preflight(preflight_options(options), job, fabric, steps, addresses));
  std::cout << fmt::format(
      "preflight passed: {} hosts resolve, accept the job key, and place {} ranks as the hostfile says{}\n",
      job.topology.hosts.size(), job.plan.np,
      fabric.is_null() ? "" : fmt::format("; the {} fabric check passed", string_at(fabric, "/backend")));
  return ok_status();
}

Status run_job(const LauncherOptions& options, const std::vector<std::string>& user_command) {
  if (user_command.empty())
    return make_error(Exit::kUsage, "no command: mpi-launcher run [options] -- CMD ARGS...");
  auto t0 = Clock::now();
  adopt_orphans();  // what mpirun leaves behind is ours to end (common/process.h)
  auto prepared = prepare_job(options.job, user_command);
  if (!prepared && options.dry_run) return prepared.take_error();
  if (!prepared) return report_setup_failure(options, user_command, t0, prepared.take_error());
  if (options.dry_run) {
    std::cout << shell_join(build_command(prepared->plan)) << "\n";
    return ok_status();
  }
  fit_descriptor_limit();  // before the coordinator's listener takes its cap
  catch_stop_signals();
  Job job = std::move(*prepared);
  StatusFeed feed(options.status, static_cast<int>(job.topology.hosts.size()), job.plan.np);
  JobEvents events(options.events, job.topology.jobset);
  RestartBudget budget(options.restart);
  std::vector<AttemptRecord> attempts;
  AttemptPlan plan;
  plan.restartable = [&](const Failure& failure) {
    return options.restart.restarts > 0 && restart_cause(failure, options.restart.retryable_exits) &&
           !stop_requested() && budget.allows(Clock::now());
  };
  std::optional<Clock::time_point> failed_at;  // the last restarted attempt's failure
  while (true) {
    JobRun run(options, job, t0, plan, feed, events);
    if (Status started = run.start(); !started)
      return report_setup_failure(options, run.command(), t0, started.error());
    std::optional<Failure> failure = run.run();
    const Clock::time_point ended =
        Clock::now();  // the attempt's verdict: its time to resume counts from here
    if (failed_at && run.launched_at() && !attempts.empty())
      attempts.back().resumed_after = std::chrono::duration<double>(*run.launched_at() - *failed_at).count();
    if (failure && restart_after(run, *failure, options.restart, budget, attempts, plan.number, t0)) {
      failed_at = ended;
      const RestartCause cause = *restart_cause(*failure, options.restart.retryable_exits);
      plan.number += 1;
      plan.check_fabric = recheck_fabric(cause);
      plan.wait_for_hosts = cause == RestartCause::kHostLost;
      begin_attempt(job, plan.number);
      continue;
    }
    run.finish(failure, attempts);
    if (!failure) return ok_status();
    // Said as the attempt failed, before the verdict's lines: not again at exit, where it would
    // follow them (an empty message: cli.h).
    return Error{failure->code == 0 ? Exit::kJobFailed : job_exit(failure->code), ""};
  }
}

}  // namespace tmpi::launch
