// `mpi-launcher run`: readiness (--wait) -> preflight -> launch -> supervision -> report.
// The steps before the launch live in run_steps.h; this file launches, supervises and
// reports. The coordinator runs on its own I/O thread from the start: it is the sidecars'
// barrier, it hears every rank agent, and it keeps the agents' start gate while the ssh step
// runs beside the launch. Its callbacks only record facts under a mutex; the main thread
// acts on them (tears the job down on the first failed rank, a lost host, or a failed check).
#include "launcher/run.h"

#include <sys/resource.h>

#include <algorithm>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/contract.h"
#include "common/files.h"
#include "common/json_fields.h"
#include "common/process.h"
#include "common/utf8.h"
#include "launcher/fabric_check.h"
#include "launcher/failure.h"
#include "launcher/job.h"
#include "launcher/job_events.h"
#include "launcher/job_rendezvous.h"
#include "launcher/preflight.h"
#include "launcher/run_steps.h"
#include "launcher/status_feed.h"
#include "rendezvous/coordinator_service.h"
#include "ssh/call.h"
#include "ssh/relay.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;
constexpr Millis kLostHostGrace(3000);
constexpr Millis kDaemonsEnd(5000);     // after mpirun's exit, for its daemons to end their ranks
constexpr Millis kMpirunLinger(10000);  // mpirun's time to exit after every rank reported its exit 0

// mpirun exited 0, so every rank did. A rank that ends within 2 s of its start sends no
// report (see agent/agent.cpp): it is listed from mpirun's status, on the host the
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

// The coordinator takes its connection cap from the soft nofile, and mpirun and all it starts
// here inherit it (mpi_command.h): raised to the hard limit, capped at kNofileCap.
void cap_descriptor_limit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  auto soft = capped_nofile(limit.rlim_cur, limit.rlim_max);
  if (!soft) return;
  std::uint64_t was = limit.rlim_cur;
  limit.rlim_cur = *soft;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0)
    spdlog::debug("descriptor limit: soft nofile {} set to {} (the hard limit, at most {})", was, *soft,
                  kNofileCap);
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
  TMPI_CHECK(preflight(options, job, fabric, steps, addresses));
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
  cap_descriptor_limit();
  catch_stop_signals();
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
    coordinator.finish(options.wait == WaitFor::kSidecar && !failure);
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
  const std::vector<std::string> host_names = job.topology.host_names();
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
  // The ssh step beside the launch (run_steps.h): its verdict opens the agents' start gate,
  // or stops the job, as its failure before the launch would have (exit 69, the table). The
  // preflight's word wins over what mpirun made of the same fault (an sshd that refuses it).
  // Declared first, so that it outlives the check that hands it sessions (ssh/relay.h).
  std::unique_ptr<SshRelay> relay;
  std::optional<SshCheckBeside> ssh_beside;
  std::optional<Failure> preflight_failure;
  auto ssh_verdict = [&](const std::vector<CheckRow>& rows) {
    preflight_steps.push_back({"ssh", ssh_beside->seconds()});
    ssh_beside.reset();
    // A check cut short by a stop signal left hosts unchecked, with no row: that is no pass.
    if (rows.empty() && stop_requested()) return coordinator.stop_gate("the launcher was stopped");
    if (rows.empty()) return coordinator.open_gate();
    Error failed = preflight_failed(rows);
    preflight_failure = Failure{static_cast<int>(failed.exit), failed.message, "PreflightFailed"};
    coordinator.stop_gate(failed.message);
    std::lock_guard lock(shared.mutex);
    shared.failure = preflight_failure;
  };
  spdlog::info("launching {} ranks ({}): {}", job.plan.np, flavour_name(job.plan.flavour),
               shell_join(command));
  since = Clock::now();
  std::map<std::string, std::string> mpirun_env = job.env;
  // The agents reach the coordinator at an address of the launcher's, not by its name
  // (preflight.h, coordinator_address): the preflight's DNS step resolved it.
  std::vector<std::string> own =
      at_launch.contains(job.launcher_name) ? at_launch.at(job.launcher_name) : std::vector<std::string>{};
  if (own.empty()) {
    std::vector<CheckRow> unresolved;  // the name, as before: the agents will say what they find
    own = resolve_hosts({job.launcher_name}, unresolved)[job.launcher_name];
  }
  // Its pod IP (status.podIP, in hosts.json) goes first: a dual-stack cluster's first family,
  // as the cluster chose it, rather than whichever address sorts first.
  if (job.topology.launcher) {
    auto primary = std::find(own.begin(), own.end(), job.topology.launcher->address);
    if (primary != own.end()) std::rotate(own.begin(), primary, own.end());
  }
  mpirun_env[env_name(param::kCoordinator.name)] =
      coordinator_address(job.launcher_name, own, coordinator.listening_on(), options.job.rendezvous_port);
  if (job.start_gate) {
    // MPI's ssh (mpi-ssh) runs over the check's connections where it can (ssh/relay.h).
    if (job.plan.ssh_agent != "ssh") {
      if (auto started = SshRelay::start(host_names, options.job.ssh_port)) {
        relay = std::move(*started);
        mpirun_env[std::string(contract::kSshRelay)] = relay->socket_path();
      } else {
        spdlog::warn("{}; {}'s ssh makes its own connections", started.error().message, job.plan.launcher);
      }
    }
    // Without the relay the daemons start over ssh of their own, without the check's verdict
    // on their hosts: Open MPI's launch order then holds nothing, and the agents ask (job.h).
    if (!relay) mpirun_env[env_name(param::kStartGate.name)] = "true";
    ssh_beside.emplace(job, options.job.ssh_port, relay.get());
  }
  auto spawned = ProcessGroup::spawn(command, mpirun_env);
  if (!spawned) return fail_before_launch(spawned.error(), "JobFailed");
  ProcessGroup mpi = *spawned;
  feed.phase("Running", hosts);
  std::optional<Failure> failure;
  std::optional<int> status;
  const Millis job_timeout = options.timeout;
  const auto launched = Clock::now();
  std::optional<Clock::time_point> all_exited_at;
  while (!(status = mpi.poll())) {
    if (ssh_beside) {
      if (auto rows = ssh_beside->poll()) ssh_verdict(*rows);
    }
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
    if (failure || stop_requested()) {
      if (!failure)
        failure = Failure{stop_code(),
                          fmt::format("stopped by signal {} (the pod is being deleted?)", stop_code() - 128),
                          "JobStopped"};
      int running;
      {
        std::lock_guard lock(shared.mutex);
        running = std::max(0, job.plan.np - shared.exited);
      }
      if (failure->event == "PreflightFailed") {
        spdlog::error("{}; stopping {}", failure->reason, job.plan.launcher);
      } else {
        spdlog::error("{}; stopping {} other ranks", failure->reason, running);
      }
      // A lost host's daemon cannot pass mpirun's SIGTERM on, so the whole grace (10 s by
      // default) would only delay the report: a job with a lost host gets at most 3 s; so does
      // one whose ssh check failed (no rank runs, and a host may not answer).
      Millis grace = options.grace;
      if (failure->event == "HostLost" || failure->event == "PreflightFailed")
        grace = std::min(grace, kLostHostGrace);
      status = mpi.stop(grace);
      break;
    }
    std::this_thread::sleep_for(Millis(10));  // the job's end is noticed within 10 ms (bench row 1)
  }
  phase_done("job", since);
  if (ssh_beside) ssh_verdict(ssh_beside->wait());  // mpirun ended first: its verdict still decides
  // mpirun, stopped, may exit before its daemons have ended their ranks: they are waited for
  // (ssh/relay.h, wait_idle), except where a host is lost or its check failed (no daemon there
  // will answer, and the report would wait for nothing).
  bool unreachable = failure && (failure->event == "HostLost" || failure->event == "PreflightFailed");
  if (relay && !unreachable && !relay->wait_idle(kDaemonsEnd))
    spdlog::debug("ssh relay: a daemon still ran {} ms after {} exited", kDaemonsEnd.count(),
                  job.plan.launcher);
  relay.reset();  // mpirun is gone: every channel it left open closes now
  if (preflight_failure) failure = preflight_failure;
  int strays = end_strays();  // said once the job's verdict is known (failure.h)
  JobOutcome outcome{failure, std::nullopt, *status, job.plan.launcher};
  {
    std::lock_guard lock(shared.mutex);
    if (!outcome.primary) outcome.primary = shared.failure;  // a rank report that raced mpirun's exit
    outcome.secondary = shared.secondary;
  }
  failure = attribute_failure(outcome, [&] {
    return find_lost_host(host_names, at_launch, options.job.ssh_port, job.private_key, kLostHostBudget,
                          stop_requested);
  });
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
  report_strays(strays, failure.has_value(), job.plan.launcher);
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
