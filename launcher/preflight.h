// The launcher's checks before a multi-hour job starts: every host name resolves (its own
// included, Trainer #3783), and every sshd accepts the job key with the pinned host key (in
// parallel, with bounded concurrency). Where ranks land (Open MPI 5 running every rank on the
// launcher, Trainer #4028) is checked by each rank's agent as the job starts
// (agent/placement.h); `--placement probe` adds the old check, a tiny MPI job before the real
// one, which `mpi-launcher check` always runs. Failures are rows of a table: host, check, reason.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/ssh_probe.h"
#include "common/topology.h"
#include "launcher/failure.h"

namespace tmpi::launch {

struct CheckRow {
  std::string host, check, reason;
};

// Asked before each host is taken up: true, and the rest are left unchecked (no row).
using GiveUp = std::function<bool()>;

// Each name's addresses (numeric, sorted, without repeats), as the pods' resolver gives them
// now; a name that does not resolve gets a "dns" row in `failed`, and no entry.
using HostAddresses = std::map<std::string, std::vector<std::string>>;
HostAddresses resolve_hosts(const std::vector<std::string>& names, std::vector<CheckRow>& failed,
                            const GiveUp& give_up = {});
// The first host whose name resolves `now` to none of the addresses it had `at_launch`: its
// pod was recreated (the same name, a new pod, a new IP), and the job's ranks went with the
// old one. Said as the coordinator says it when the new pod registers first; nullopt if none.
std::optional<GoneHost> recreated_host(const HostAddresses& at_launch, const HostAddresses& now);
// Where the agents reach the coordinator (TMPI_COORDINATOR): an address, not the launcher's
// name, so that no agent needs DNS for it (a lookup is the one wait that the agents' request
// deadline cannot cut short: plain_http.h). `listen` when it names one address (as given:
// the coordinator serves nowhere else); else the first of `addresses` (the launcher's own
// name's, resolve_hosts) that the coordinator serves: IPv4 under 0.0.0.0, either under "::"
// (IPv6 bracketed), and of those never a loopback one, which would be each agent's own pod.
// None of them: `name`, as before.
std::string coordinator_address(const std::string& name, const std::vector<std::string>& addresses,
                                const std::string& listen, int port);
// After MPI stopped the job with no rank failing on its own: the first of `hosts` that no
// longer resolves, was recreated, or no longer takes the job key (its name, and "host X ..."), else nullopt.
// It takes DNS and, only when that finds nothing, an ssh handshake to each host (2 s at most,
// 16 at a time). No host is taken up past `budget`, or once `stop` says so (the pod is being
// deleted): a partition of a large job, every handshake waiting out its 2 s, or a resolver
// that hangs, would otherwise hold the report for minutes. What was not reached is not named.
inline constexpr Millis kLostHostBudget{10000};
std::optional<GoneHost> find_lost_host(const std::vector<std::string>& hosts, const HostAddresses& at_launch,
                                       int port, const std::string& private_key,
                                       Millis budget = kLostHostBudget, const GiveUp& stop = {});
// Each host's verdict as soon as it is known, from the worker that reached it: the session
// that passed (for the ssh relay, ssh/relay.h), or none and the problem. Without
// `run_command`, a host passes once it has shown the job's host key and taken the job key.
using SshOutcome =
    std::function<void(const std::string& host, SshSessionPtr session, const std::string& problem)>;
std::vector<CheckRow> check_ssh(const std::vector<std::string>& hosts, int port,
                                const std::string& private_key, int concurrency = 16,
                                Millis timeout = Millis(10000), const SshOutcome& outcome = {},
                                const GiveUp& give_up = {}, bool run_command = true);

// Where rank r must run: hosts in hostfile order, each filled to its slots, round after
// round if np exceeds the slots (by-slot mapping, the default of Open MPI and hydra).
std::vector<std::string> expected_placement(const Topology& topology, int np);

// Parses `hostname` output tagged by rank ("[1,3]<stdout>:host" from Open MPI's
// --tag-output, "[3] host" from hydra's -prepend-rank) and compares it with the expected
// placement by short host name.
std::vector<CheckRow> check_placement(const std::vector<std::string>& expected, const std::string& output);
// The row of a rank that ran on `actual`, not on `expected`: from the probe, or an agent.
CheckRow misplaced_row(int rank, const std::string& actual, const std::string& expected);
// How many ranks the probe's output says where they ran: when all have, the probe is done.
int ranks_reported(const std::string& output);

std::string render_table(const std::vector<CheckRow>& rows);

}  // namespace tmpi::launch
