// The steps of `mpi-launcher run` before the job's own mpirun, and what every step shares:
// the stop signal (SIGTERM: the pod is being deleted), the steps' timings for report.json,
// the wait for the hosts, and the preflight. Split from run.cpp, which launches and
// supervises, so that each reads as one thing.
//
// The preflight's ssh step runs in one of two places (--ssh-check): before the launch, in
// preflight(), or beside it (the default, when no other step of the preflight is an MPI job:
// Job::start_gate), on a thread of its own (SshCheckBeside), while mpirun starts its daemons
// and the ranks' agents wait at the start gate (agent/gate.h) for its verdict. Either way no
// rank starts before every sshd has accepted the job key; beside the launch, the handshakes
// cost the job no wall time of their own while mpirun's daemon start takes longer (measured:
// at 64 pods the ssh step was 0.9 s of a 5 s launch).
#pragma once

#include <functional>
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "launcher/choices.h"
#include "launcher/fabric_check.h"
#include "launcher/job.h"
#include "launcher/job_rendezvous.h"
#include "launcher/preflight.h"
#include "launcher/trouble_keys.h"
#include "rendezvous/api_relay_server.h"
#include "ssh/relay.h"

namespace tmpi::launch {

// SIGTERM or SIGINT to the launcher: every phase asks stop_requested(), and ends at once.
void catch_stop_signals();
bool stop_requested();
// Stopped by signal N, mpi-launcher exits 128+N, as a shell reports a process that N ended.
int stop_code();
Error stopped_during(std::string_view phase);

struct Phase {
  std::string name;
  double seconds;
};
// [{"name", "seconds"}]: report.json's phases, and the preflight's steps.
nlohmann::json phases_json(const std::vector<Phase>& phases);

// What the wait for the hosts needs of the launcher's settings.
struct WaitOptions {
  WaitFor wait = WaitFor::kSidecar;  // --wait
  Millis deadline{0};                // --rendezvous-timeout
  int ssh_port = 0;
  int rendezvous_port = 0;  // where the sidecars register, for the message of one that never did
};

// What the API says of the pods of these hosts (JobEvents::pods): asked once, at the deadline.
using AskPods = std::function<rdv::RelayedPods(const std::vector<std::string>& hosts)>;

// --wait: the sidecars' barrier, every sshd polled by the launcher itself, or nothing. At the
// sidecars' deadline, each host that never came is told apart (launcher/missing_hosts.h),
// with the API's word on its pod where `ask_pods` has one.
Status wait_for_hosts(const WaitOptions& options, const Job& job, Shared& shared,
                      const AskPods& ask_pods = {});

// What the preflight needs of the launcher's settings.
struct PreflightOptions {
  bool ssh_waited = false;  // --wait ssh: the wait has had every sshd take the job key
  int ssh_port = 0;
  FabricOptions fabric;  // --check and nccl-check's own settings
};

// DNS, ssh (unless it runs beside the launch: job.start_gate), the placement probe (when
// the job asks for it: the agents check placement themselves, agent/placement.h), then the
// fabric check (--check); `fabric` gets nccl-check's report; `steps` the time of each step
// (report.json's "preflight"), so that a slow preflight says which step is slow; `addresses`
// every name's addresses, as the DNS step found them.
Status preflight(const PreflightOptions& options, const Job& job, nlohmann::json& fabric,
                 std::vector<Phase>& steps, HostAddresses& addresses);

// The troubleshooting key of a failed preflight (trouble_keys.h): its first row's check,
// the fabric check's for nccl-check's rows, and no NCCL for exit 78.
Trouble preflight_trouble(const std::vector<CheckRow>& rows, Exit exit);

// The preflight's failure, as run() reports it whether the ssh step ran before the launch or
// beside it: exit 69, the table of `rows` on stderr, no rank started, one row (its host, check
// and reason, bounded; the fabric check's culprit host first) and how many more, and its key.
Error preflight_failed(const std::vector<CheckRow>& rows, Exit exit = Exit::kUnavailable);

// The ssh check's rows for the daemons that mpirun could not start over the relay, where
// that start was the check's proof of commands (SshCheckBeside::daemons_prove_commands):
// each host whose daemon exited non-zero before mpirun ended (`mpirun_ended`), its status
// and what it printed, on one line. A daemon that ended after mpirun is mpirun's loss, not
// the host's fault, and is left out.
std::vector<CheckRow> daemon_start_rows(const std::vector<SshRelay::FailedStart>& failed,
                                        const std::string& user, Clock::time_point mpirun_ended);

// The ssh step beside the launch: check_ssh() over the job's hosts on a thread of its own,
// started at construction. Its handshakes are bounded (10 s each), so wait() is too. Take its
// rows once, by poll() or wait(); it must not move while it runs (hold it in an optional).
class SshCheckBeside {
 public:
  // With a `relay`, each host's verdict goes to it as soon as it is known (ssh/relay.h); the
  // relay must outlive the check.
  SshCheckBeside(const Job& job, int ssh_port, SshRelay* relay = nullptr);
  // The rows if the check has ended (empty: every sshd passed), else nullopt.
  std::optional<std::vector<CheckRow>> poll();
  std::vector<CheckRow> wait();
  // The check's own time, for report.json's preflight steps ("ssh"), once its rows are taken.
  double seconds() const { return seconds_; }
  // Whether the check leaves out its `exec true`: mpirun starts every daemon itself, each over
  // the relay on the checked session (Open MPI up to 64 hosts, job.h's agents_ask false), so
  // a daemon's start is the proof that the account runs commands, and a start that failed is
  // named from the relay (daemon_start_rows). Under hydra the check runs it: its verdict
  // opens the gate at which the proxies' ranks wait, so it must be whole on its own; past 64
  // hosts, or with no relay, daemons start over ssh that the relay never sees.
  bool daemons_prove_commands() const { return daemons_prove_commands_; }

 private:
  bool daemons_prove_commands_ = false;
  std::future<std::vector<CheckRow>> result_;
  std::optional<std::vector<CheckRow>> ran_here_;  // no thread could be started: it ran here
  double seconds_ = 0;
};

}  // namespace tmpi::launch
