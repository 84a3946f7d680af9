// `mpi-launcher run`: readiness (--wait) -> preflight -> launch -> supervision -> report.
// The coordinator runs on its own I/O thread from the start: it is the sidecars' barrier
// and it hears every rank agent. Its callbacks only record facts under a mutex; the main
// thread acts on them (tears the job down on the first failed rank or a lost host).
#include "launcher/run.h"

#include <algorithm>
#include <csignal>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/files.h"
#include "common/utf8.h"
#include "launcher/fabric_check.h"
#include "launcher/failure.h"
#include "launcher/job.h"
#include "launcher/job_events.h"
#include "launcher/job_rendezvous.h"
#include "launcher/preflight.h"
#include "launcher/process.h"
#include "launcher/status_feed.h"
#include "rendezvous/coordinator_service.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;
// SIGTERM (the pod is being deleted) or SIGINT: every phase asks, and ends at once.
volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int signal) {
  g_stop_signal = signal;
}
bool stop_requested() {
  return g_stop_signal != 0;
}
// Stopped by signal N, mpi-launcher exits 128+N, as a shell reports a process that N ended.
int stop_code() {
  return 128 + static_cast<int>(g_stop_signal);
}
Error stopped_during(std::string_view phase) {
  return make_error(job_exit(stop_code()), "stopped by signal {} {} (the pod is being deleted?)",
                    static_cast<int>(g_stop_signal), phase);
}

constexpr Millis kLostHostGrace(3000);
constexpr Millis kMpirunLinger(10000);  // mpirun's time to exit after every rank reported its exit 0

struct Phase {
  std::string name;
  double seconds;
};

// [{"name", "seconds"}]: report.json's phases, and the preflight's steps.
json phases_json(const std::vector<Phase>& phases) {
  json out = json::array();
  for (const auto& phase : phases) out.push_back({{"name", phase.name}, {"seconds", phase.seconds}});
  return out;
}

// mpirun exited 0, so every rank did. A rank that ends within 2 s of its start sends no
// report (see rank_agent.cpp): it is listed from mpirun's status, on the host the
// hostfile gave it, with "reported": false and no duration.
void record_clean_exits(json& ranks, const std::vector<std::string>& placement) {
  std::set<int> heard;
  for (const auto& rank : ranks) heard.insert(rank["rank"].get<int>());
  for (int rank = 0; rank < static_cast<int>(placement.size()); ++rank) {
    if (heard.contains(rank)) continue;
    const std::string& name = placement[static_cast<std::size_t>(rank)];
    std::string host = name.substr(0, name.find('.'));  // the pod's hostname, as the agents report it
    ranks.push_back(rank_json({rank, host, true, 0, 0, std::nullopt, false}));
  }
  std::sort(ranks.begin(), ranks.end(), [](const json& a, const json& b) { return a["rank"] < b["rank"]; });
}

Status wait_for_hosts(const LauncherOptions& options, const Job& job, Shared& shared) {
  const std::string& mode = options.wait;
  if (mode == "none") return ok_status();
  Deadline deadline(options.rendezvous.deadline);
  std::vector<std::string> names;
  for (const auto& host : job.topology.hosts) names.push_back(host.name);
  auto last_progress = Clock::now();
  while (true) {
    if (stop_requested()) return stopped_during("while waiting for the hosts");
    if (mode == "sidecar") {
      std::lock_guard lock(shared.mutex);
      if (shared.barrier) return ok_status();
      if (shared.deadline) {
        return make_error(Exit::kTempFail,
                          "rendezvous timed out after {} s: {}; raise TMPI_RENDEZVOUS_TIMEOUT",
                          deadline.budget().count() / 1000, *shared.deadline);
      }
    } else {  // ssh: poll every sshd ourselves
      auto rows = check_ssh(names, options.job.ssh_port, job.private_key, 16, Millis(3000));
      if (rows.empty()) return ok_status();
      std::string summary = fmt::format("{}/{} hosts ready; waiting for {} ({})", names.size() - rows.size(),
                                        names.size(), rows.front().host, rows.front().reason);
      if (deadline.expired()) {
        return make_error(Exit::kTempFail,
                          "ssh wait timed out after {} s: {}\n{}raise TMPI_RENDEZVOUS_TIMEOUT",
                          deadline.budget().count() / 1000, summary, render_table(rows));
      }
      if (Clock::now() - last_progress >= Millis(5000)) {
        spdlog::info("ssh wait: {}", summary);
        last_progress = Clock::now();
      }
    }
    std::this_thread::sleep_for(Millis(200));
  }
}

// DNS, ssh, the placement probe (when the job asks for it: the agents check placement
// themselves, rank_placement.h), then the fabric check (--check); `fabric` gets nccl-check's
// report; `steps` the time of each step (report.json's "preflight"), so that a slow preflight
// says which step is slow; `addresses` every name's addresses, as the DNS step found them.
Status preflight(const LauncherOptions& options, const Job& job, json& fabric, std::vector<Phase>& steps,
                 HostAddresses& addresses) {
  auto since = Clock::now();
  auto step_done = [&](const char* name) {
    steps.push_back({name, std::chrono::duration<double>(Clock::now() - since).count()});
    since = Clock::now();
  };
  std::vector<std::string> names = {job.launcher_name};
  for (const auto& host : job.topology.hosts) names.push_back(host.name);
  std::vector<CheckRow> rows;
  addresses = resolve_hosts(names, rows);
  step_done("dns");
  if (stop_requested()) return stopped_during("during the preflight");
  if (rows.empty() && options.wait != "ssh") {
    std::vector<std::string> hosts(names.begin() + 1, names.end());
    rows = check_ssh(hosts, options.job.ssh_port, job.private_key);
    step_done("ssh");
  }
  if (stop_requested()) return stopped_during("during the preflight");
  if (rows.empty() && job.probe_placement) {
    bool hydra = job.plan.flavour == Flavour::kMpich || job.plan.flavour == Flavour::kIntel;
    LaunchPlan probe = plan_for(job, {"hostname"}, {hydra ? "-prepend-rank" : "--tag-output"});
    spdlog::debug("placement probe: {}", shell_join(build_command(probe)));
    const auto expected = expected_placement(job.topology, job.plan.np);
    DoneWhen every_rank_said{
        [&](const std::string& output) { return ranks_reported(output) >= job.plan.np; }};
    auto ran = run_capture(build_command(probe), job.env, Millis(120000), stop_requested, every_rank_said);
    if (stop_requested()) return stopped_during("during the preflight's placement check");
    if (!ran) return make_error(Exit::kUnavailable, "placement check: {}", ran.error().message);
    if (ran->ended_after_done) {
      spdlog::warn("placement check: {} did not exit {} s after every rank had reported; ended it",
                   job.plan.launcher, every_rank_said.linger.count() / 1000);
    }
    rows = check_placement(expected, ran->output);
    if (ran->status != 0 && rows.empty())
      rows.push_back({job.launcher_name, "placement", "the probe job failed: " + ran->output});
    step_done("placement");
  }
  Exit exit = Exit::kUnavailable;
  if (std::string backend = fabric_backend(options.fabric.check, job.topology);
      rows.empty() && backend != "none") {
    spdlog::info("fabric check: nccl-check --backend {} over {} ranks", backend, job.plan.np);
    auto checked_or = run_fabric_check(options.fabric, job, backend, stop_requested);
    if (stop_requested()) return stopped_during("during the fabric check");
    TMPI_ASSIGN(FabricCheck checked, std::move(checked_or));
    std::cout << checked.table << std::flush;
    step_done("fabric");
    fabric = checked.report;
    rows = checked.rows;
    exit = checked.exit;
  }
  if (rows.empty()) return ok_status();
  std::cerr << render_table(rows);
  return make_error(exit, "preflight failed on {} check(s); no rank was started (see the table above)",
                    rows.size());
}

// report.json when the job cannot even be set up (no hosts.json or job key, the
// coordinator's port taken): the exit alone, so that every way out of `run` leaves a report.
Error report_setup_failure(const LauncherOptions& options, const std::vector<std::string>& command,
                           Clock::time_point t0, Error error) {
  json report = {{"hosts", json::array()},
                 {"ranks", json::array()},
                 {"phases", json::array()},
                 {"exit", exit_record(Failure{static_cast<int>(error.exit), error.message, "JobFailed"})},
                 {"command", command}};
  report["exit"]["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
  if (auto written = write_atomic(options.report, dump_json(report, 2) + "\n"); !written)
    spdlog::warn("report not written: {}", written.error().message);
  return error;
}

}  // namespace

Status check_job(const LauncherOptions& options) {
  TMPI_ASSIGN(Job job, prepare_job(options.job, {"true"}));
  job.probe_placement = true;  // no rank of a job is to check it here
  json fabric;
  std::vector<Phase> steps;
  HostAddresses addresses;
  TMPI_CHECK(preflight(options, job, fabric, steps, addresses));
  std::cout << fmt::format(
      "preflight passed: {} hosts resolve, accept the job key, and place {} ranks as the hostfile says{}\n",
      job.topology.hosts.size(), job.plan.np,
      fabric.is_null() ? "" : fmt::format("; the {} fabric check passed", fabric.value("backend", "")));
  return ok_status();
}

Status run_job(const LauncherOptions& options, const std::vector<std::string>& user_command) {
  if (user_command.empty())
    return make_error(Exit::kUsage, "no command: mpi-launcher run [options] -- CMD ARGS...");
  auto t0 = Clock::now();
  adopt_orphans();  // what mpirun leaves behind is ours to end (process.h)
  std::vector<Phase> phases, preflight_steps;
  auto phase_done = [&](const char* name, Clock::time_point since) {
    phases.push_back({name, std::chrono::duration<double>(Clock::now() - since).count()});
  };
  auto prepared = prepare_job(options.job, user_command);
  if (!prepared && options.dry_run) return prepared.take_error();
  if (!prepared) return report_setup_failure(options, user_command, t0, prepared.take_error());
  Job job = std::move(*prepared);
  if (options.dry_run) {
    std::cout << shell_join(build_command(job.plan)) << "\n";
    return ok_status();
  }
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  Shared shared;
  JobRendezvous coordinator(options, job, shared);
  if (Status started = coordinator.start(options); !started)
    return report_setup_failure(options, build_command(job.plan), t0, started.error());
  const int hosts = static_cast<int>(job.topology.hosts.size());
  StatusFeed feed(options.status, hosts, job.plan.np);
  JobEvents events(options.events, job.topology.jobset);
  std::vector<std::string> command = build_command(job.plan);
  json fabric;
  // report.json, whichever way the job ends (a failed preflight too), then the sidecars' end.
  auto finish = [&](const std::optional<Failure>& failure) {
    json report = coordinator.snapshot();
    if (!failure) record_clean_exits(report["ranks"], expected_placement(job.topology, job.plan.np));
    report["phases"] = phases_json(phases);
    if (!preflight_steps.empty()) report["preflight"] = phases_json(preflight_steps);
    report["exit"] = exit_record(failure);
    report["exit"]["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
    report["command"] = command;
    if (!fabric.is_null()) report["check"] = fabric;
    feed.finish(failure ? failure->code : 0, failure ? failure->reason : "");
    if (failure) events.warn(failure->event, failure->reason);
    if (auto written = write_atomic(options.report, dump_json(report, 2) + "\n"); !written) {
      spdlog::warn("report not written: {}", written.error().message);
    } else {
      spdlog::debug("report written to {}", options.report);
    }
    // After a success the sidecars are served two more beats, to hear the end and exit 0.
    // After a failure the launcher exits at once: the JobSet's end deletes the node pods
    // (docs/trainer-rules.md: still-active Jobs are deleted when it finishes), and each
    // sidecar leaves on that SIGTERM; lingering only delayed the failure by 10 s.
    coordinator.finish(options.wait == "sidecar" && !failure);
    feed.wait();  // the final status was posted above, while the sidecars were told
  };
  feed.phase("WaitingForHosts", 0);
  auto since = Clock::now();
  // A failure before any rank ran: report it, then exit with its code.
  auto fail_before_launch = [&](const Error& error, const char* event) -> Error {
    Failure failure{static_cast<int>(error.exit), error.message, event};
    if (stop_requested()) failure = Failure{stop_code(), error.message, "JobStopped"};
    finish(failure);
    return Error{job_exit(failure.code), failure.reason};
  };
  if (Status waited = wait_for_hosts(options, job, shared); !waited) {
    phase_done("wait", since);
    return fail_before_launch(waited.error(), "RendezvousTimeout");
  }
  phase_done("wait", since);
  std::vector<std::string> host_names;
  for (const auto& host : job.topology.hosts) host_names.push_back(host.name);
  // Where each host was when its ranks started: a host whose name resolves elsewhere after a
  // failure was recreated (find_lost_host), whether or not its new pod registered first.
  HostAddresses at_launch;
  if (options.preflight) {
    feed.phase("Preflight", hosts);
    since = Clock::now();
    Status checked = preflight(options, job, fabric, preflight_steps, at_launch);
    end_strays();  // the fabric check's mpirun may leave an ssh to a host cut off, as the job's may
    phase_done("preflight", since);
    feed.fabric(fabric);
    if (!checked) return fail_before_launch(checked.error(), "PreflightFailed");
  } else {
    std::vector<CheckRow> unresolved;  // not checked without the preflight: MPI will say
    at_launch = resolve_hosts(host_names, unresolved);
  }
  spdlog::info("launching {} ranks ({}): {}", job.plan.np, flavour_name(job.plan.flavour),
               shell_join(command));
  since = Clock::now();
  auto spawned = ProcessGroup::spawn(command, job.env);
  if (!spawned) return fail_before_launch(spawned.error(), "JobFailed");
  ProcessGroup mpi = *spawned;
  feed.phase("Running", hosts);
  std::optional<Failure> failure;
  std::optional<int> status;
  const Millis job_timeout = options.timeout;
  const auto launched = Clock::now();
  std::optional<Clock::time_point> all_exited_at;
  while (!(status = mpi.poll())) {
    if (job_timeout.count() > 0 && Clock::now() - launched >= job_timeout) {
      // The snapshot is taken on the coordinator's thread, whose callbacks take the mutex.
      Failure timed_out = past_timeout(job_timeout, coordinator.snapshot()["ranks"]);
      std::lock_guard lock(shared.mutex);
      if (!shared.failure) shared.failure = std::move(timed_out);
    }
    bool all_exited_clean;
    {
      std::lock_guard lock(shared.mutex);
      failure = shared.failure;
      all_exited_clean = shared.exited >= job.plan.np && shared.failed == 0 && !shared.secondary;
      // The reporter posts only what changed, at most once per --status-interval.
      feed.ranks(shared.started - shared.exited, shared.failed, failure ? failure->reason : "");
    }
    // Every rank has reported its exit 0, yet mpirun runs on (prterun 5.0.7 was seen to, under
    // load): after kMpirunLinger it is ended, and the job is what its ranks said it was.
    if (all_exited_clean && !failure) {
      if (!all_exited_at) all_exited_at = Clock::now();
      if (Clock::now() - *all_exited_at >= kMpirunLinger) {
        spdlog::warn("every rank exited 0, but {} did not exit {} s later; ending it", job.plan.launcher,
                     kMpirunLinger.count() / 1000);
        mpi.stop(options.grace);
        status = 0;
        break;
      }
    }
    if (failure || g_stop_signal != 0) {
      if (!failure)
        failure = Failure{stop_code(),
                          fmt::format("stopped by signal {} (the pod is being deleted?)", g_stop_signal),
                          "JobStopped"};
      int running;
      {
        std::lock_guard lock(shared.mutex);
        running = std::max(0, job.plan.np - shared.exited);
      }
      spdlog::error("{}; stopping {} other ranks", failure->reason, running);
      // A lost host's daemon cannot pass mpirun's SIGTERM on, so the whole grace (10 s by
      // default) would only delay the report: a job with a lost host gets at most 3 s.
      Millis grace = options.grace;
      if (failure->event == "HostLost") grace = std::min(grace, kLostHostGrace);
      status = mpi.stop(grace);
      break;
    }
    std::this_thread::sleep_for(Millis(10));  // the job's end is noticed within 10 ms (bench row 1)
  }
  phase_done("job", since);
  if (int strays = end_strays(); strays > 0)
    spdlog::info(
        "ended {} process(es) that {} left behind (its ssh sessions, in process groups of their own)", strays,
        job.plan.launcher);
  JobOutcome outcome{failure, std::nullopt, *status, job.plan.launcher};
  {
    std::lock_guard lock(shared.mutex);
    if (!outcome.primary) outcome.primary = shared.failure;  // a rank report that raced mpirun's exit
    outcome.secondary = shared.secondary;
  }
  failure = attribute_failure(
      outcome, [&] { return find_lost_host(host_names, at_launch, options.job.ssh_port, job.private_key); });
  {
    std::lock_guard lock(shared.mutex);
    if (!shared.misplaced.empty() && failure && failure->event == "RankMisplaced") {
      std::cerr << render_table(shared.misplaced);
      if (shared.misplaced_count > static_cast<int>(shared.misplaced.size()))
        std::cerr << fmt::format("... and {} more\n", shared.misplaced_count - shared.misplaced.size());
      failure->reason = fmt::format(
          "placement: {} rank(s) ran elsewhere than the hostfile says, and were not started; the job was "
          "stopped (see the table above)",
          shared.misplaced_count);
    }
  }
  if (failure) spdlog::error("{}", failure->reason);  // now, before the report and the status take their time
  finish(failure);
  if (!failure) {
    spdlog::info("job finished: every rank exited 0");
    return ok_status();
  }
  // An empty message: said above, once (cli.h).
  return Error{failure->code == 0 ? Exit::kJobFailed : job_exit(failure->code), ""};
}

}  // namespace tmpi::launch
