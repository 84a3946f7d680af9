// See run_steps.h.
#include "launcher/run_steps.h"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/param_names.h"
#include "common/params.h"
#include "common/process.h"
#include "common/utf8.h"
#include "launcher/fabric_check.h"
#include "rendezvous/trainjob_events.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;

// The failed row that a preflight's message names: bounded, so that the message stays within
// the Event's 1 KiB with its troubleshooting key (a fabric row's reason can run long).
constexpr std::size_t kRowHostMax = 128;
constexpr std::size_t kRowReasonMax = 512;

// The row that a preflight's message names: a host the fabric check named as the culprit
// ("mpi host"), else the first row that is not the whole world's (an all-reduce over every rank
// names no one), else the first.
const CheckRow& named_row(const std::vector<CheckRow>& rows) {
  for (const CheckRow& row : rows)
    if (row.check.ends_with(" host")) return row;
  for (const CheckRow& row : rows)
    if (!row.check.ends_with(" world")) return row;
  return rows.front();
}

volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int signal) {
  g_stop_signal = signal;
}

}  // namespace

void catch_stop_signals() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
}
bool stop_requested() {
  return g_stop_signal != 0;
}
int stop_code() {
  return 128 + static_cast<int>(g_stop_signal);
}
Error stopped_during(std::string_view phase) {
  return make_error(job_exit(stop_code()), "stopped by signal {} {} (the pod is being deleted?){}",
                    static_cast<int>(g_stop_signal), phase, trouble_note(Trouble::kJobStopped));
}

json phases_json(const std::vector<Phase>& phases) {
  json out = json::array();
  for (const auto& phase : phases) out.push_back({{"name", phase.name}, {"seconds", phase.seconds}});
  return out;
}

Trouble preflight_trouble(const std::vector<CheckRow>& rows, Exit exit) {
  if (exit == Exit::kConfig) return Trouble::kNcclMissing;  // no restart brings NCCL (fabric_check.cpp)
  const std::string_view check = rows.empty() ? "" : std::string_view(rows.front().check);
  if (check == "dns") return Trouble::kHostUnresolved;
  if (check == "ssh") return Trouble::kSshRefused;
  if (check == "placement") return Trouble::kRankMisplaced;
  return Trouble::kFabricCheckFailed;  // nccl-check's rows: "nccl-check", "nccl bandwidth", ...
}

// One row is named in the message itself: the message is what reaches the termination
// message, the Event and report.json, where the table printed above it in the log is not.
Error preflight_failed(const std::vector<CheckRow>& rows, Exit exit) {
  std::cerr << render_table(rows);
  std::string named;
  if (!rows.empty()) {
    const CheckRow& row = named_row(rows);
    named = fmt::format(": {} {}: {}", truncate_utf8(row.host, kRowHostMax, "..."), row.check,
                        truncate_utf8(row.reason, kRowReasonMax, "..."));
  }
  const std::string more =
      rows.size() > 1 ? fmt::format(" (and {} more in the log's table)", rows.size() - 1) : "";
  return make_error(exit, "preflight failed on {} check(s); no rank was started{}{}{}", rows.size(), named,
                    more, trouble_note(preflight_trouble(rows, exit)));
}

SshCheckBeside::SshCheckBeside(const Job& job, int ssh_port, SshRelay* relay)
    : daemons_prove_commands_(relay != nullptr && !job.agents_ask) {
  auto check = [this, hosts = job.topology.host_names(), ssh_port, key = job.private_key, relay,
                run_command = !daemons_prove_commands_] {
    auto since = Clock::now();
    SshOutcome to_relay;
    if (relay != nullptr) {
      to_relay = [relay](const std::string& host, SshSessionPtr session, const std::string& problem) {
        if (session) return relay->offer(host, std::move(session));
        relay->refuse(host, problem.empty() ? "the check failed" : problem);
      };
    }
    // A stop (the pod is being deleted) leaves the hosts not yet taken unchecked: the launcher
    // waits for this verdict after mpirun, and silent hosts would hold it 10 s a round of 16.
    std::vector<CheckRow> rows =
        check_ssh(hosts, ssh_port, key, 16, Millis(10000), to_relay, stop_requested, run_command);
    seconds_ = std::chrono::duration<double>(Clock::now() - since).count();  // read after the future's get()
    return rows;
  };
  try {
    result_ = std::async(std::launch::async, check);
  } catch (const std::system_error& e) {  // no thread to be had (the pod's process limit): run it now
    spdlog::debug("ssh check: no thread of its own ({}); it runs before the launch", e.what());
    ran_here_ = check();
  }
}

std::optional<std::vector<CheckRow>> SshCheckBeside::poll() {
  if (!ran_here_ && result_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return std::nullopt;
  return wait();
}

std::vector<CheckRow> SshCheckBeside::wait() {
  if (ran_here_) return *ran_here_;
  try {
    return result_.get();
  } catch (const std::exception& e) {  // check_ssh catches per host; what is left is memory
    return {{"(all)", "ssh", fmt::format("the check failed: {}", e.what())}};
  }
}

std::vector<CheckRow> daemon_start_rows(const std::vector<SshRelay::FailedStart>& failed,
                                        const std::string& user, Clock::time_point mpirun_ended) {
  std::vector<CheckRow> rows;
  for (const auto& start : failed) {
    if (start.ended >= mpirun_ended) continue;
    std::string said;  // on one line: a shell's message spans lines
    for (char c : start.said) {
      bool blank = c == '\n' || c == '\r' || c == '\t' || c == ' ';
      if (!blank) said += c;
      if (blank && !said.empty() && said.back() != ' ') said += ' ';
    }
    while (!said.empty() && said.back() == ' ') said.pop_back();
    rows.push_back(
        {start.host, "ssh",
         fmt::format("sshd took the job key, but MPI's daemon exited {} there as user {} before any rank "
                     "started{}; check that the account's shell runs commands (nologin runs none) and that "
                     "MPI is installed there as on the launcher",
                     start.status, user,
                     said.empty() ? ", printing nothing"
                                  : fmt::format(": \"{}\"", truncate_utf8(said, 160, "...")))});
  }
  return rows;
}

namespace {

// The API's word on the hosts that never came, or nullopt, said in one line when it has none.
std::optional<std::vector<PodStatusSummary>> pods_of(const std::vector<MissingHost>& missing,
                                                     const AskPods& ask_pods) {
  std::vector<std::string> unregistered;
  for (const MissingHost& host : missing)
    if (!host.registered) unregistered.push_back(host.host);
  if (!ask_pods || unregistered.empty()) return std::nullopt;
  rdv::RelayedPods answer = ask_pods(unregistered);
  switch (answer.outcome) {
    case rdv::RelayedPods::Outcome::kListed:
      return answer.pods;
    case rdv::RelayedPods::Outcome::kRefused:
      spdlog::warn(
          "rendezvous: the API did not list the job's pods ({}); {}; the hosts are told apart by the "
          "coordinator alone",
          answer.why, kPodsRoleHint);
      break;
    case rdv::RelayedPods::Outcome::kFailed:
      spdlog::info(
          "rendezvous: the job's pods not asked of the API ({}); the hosts are told apart by the "
          "coordinator alone",
          answer.why);
      break;
  }
  return std::nullopt;
}

}  // namespace

Status wait_for_hosts(const WaitOptions& options, const Job& job, Shared& shared, const AskPods& ask_pods) {
  if (options.wait == WaitFor::kNone) return ok_status();
  Deadline deadline(options.deadline);
  const std::vector<std::string> names = job.topology.host_names();
  auto last_progress = Clock::now();
  while (true) {
    if (stop_requested()) return stopped_during("while waiting for the hosts");
    if (options.wait == WaitFor::kSidecar) {
      std::optional<std::string> summary;
      std::vector<MissingHost> missing;
      {  // not held while the API is asked (up to 6 s): the coordinator's thread writes on
        std::lock_guard lock(shared.mutex);
        if (shared.tally.barrier) return ok_status();
        summary = shared.tally.deadline;
        missing = shared.tally.missing;
      }
      if (summary) {
        AbsenceVerdict verdict =
            classify_missing(missing, pods_of(missing, ask_pods), *summary, deadline.budget().count() / 1000,
                             options.rendezvous_port, env_name(param::kRendezvousTimeout.name));
        // Each host on a line of its own; the job's message names the first.
        for (std::size_t i = 1; i < verdict.hosts.size(); ++i)
          spdlog::error("rendezvous: {}", verdict.hosts[i].line);
        return make_error(verdict.exit, "{}", verdict.message);
      }
    } else {  // ssh: poll every sshd ourselves
      auto rows = check_ssh(names, options.ssh_port, job.private_key, 16, Millis(3000));
      if (rows.empty()) return ok_status();
      std::string summary = fmt::format("{}/{} hosts ready; waiting for {} ({})", names.size() - rows.size(),
                                        names.size(), rows.front().host, rows.front().reason);
      if (deadline.expired()) {
        return make_error(Exit::kTempFail, "ssh wait timed out after {} s: {}\n{}raise {}{}",
                          deadline.budget().count() / 1000, summary, render_table(rows),
                          env_name(param::kRendezvousTimeout.name), trouble_note(Trouble::kHostNotReady));
      }
      if (Clock::now() - last_progress >= Millis(5000)) {
        spdlog::info("ssh wait: {}", summary);
        last_progress = Clock::now();
      }
    }
    std::this_thread::sleep_for(Millis(200));
  }
}

Status preflight(const PreflightOptions& options, const Job& job, json& fabric, std::vector<Phase>& steps,
                 HostAddresses& addresses) {
  auto since = Clock::now();
  auto step_done = [&](const char* name) {
    steps.push_back({name, std::chrono::duration<double>(Clock::now() - since).count()});
    since = Clock::now();
  };
  std::vector<std::string> names = job.topology.host_names();
  names.insert(names.begin(), job.launcher_name);
  std::vector<CheckRow> rows;
  addresses = resolve_hosts(names, rows, stop_requested);
  step_done("dns");
  if (stop_requested()) return stopped_during("during the preflight");
  if (rows.empty() && !options.ssh_waited && !job.start_gate) {
    rows = check_ssh(job.topology.host_names(), options.ssh_port, job.private_key, 16, Millis(10000), {},
                     stop_requested);  // what was not checked is not passed: the stop is said next
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
    if (!ran)
      return make_error(Exit::kUnavailable, "placement check: {}{}", ran.error().message,
                        trouble_note(Trouble::kMpirunFailed));
    if (ran->ended_after_done) {
      spdlog::warn("placement check: {} did not exit {} s after every rank had reported; ended it",
                   job.plan.launcher, every_rank_said.linger.count() / 1000);
    }
    rows = check_placement(expected, ran->output);
    if (ran->status != 0 && rows.empty())
      rows.push_back(
          {job.launcher_name, "placement", "the probe job failed: " + last_utf8(ran->output, 1000, "...")});
    step_done("placement");
  }
  Exit exit = Exit::kUnavailable;
  const char* nvidia_visible = std::getenv("NVIDIA_VISIBLE_DEVICES");
  int launcher_gpus = visible_gpus("/dev", nvidia_visible != nullptr ? nvidia_visible : "");
  if (FabricBackend backend = fabric_backend(options.fabric.check, job.topology, launcher_gpus);
      rows.empty() && backend != FabricBackend::kNone) {
    spdlog::info("fabric check: nccl-check --backend {} over {} ranks",
                 choice_name(backend, kFabricBackendSpellings), job.plan.np);
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
  return preflight_failed(rows, exit);
}

}  // namespace tmpi::launch
