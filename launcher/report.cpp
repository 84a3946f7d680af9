// See report.h.
#include "launcher/report.h"

#include <algorithm>
#include <set>

#include "agent/contract.h"
#include "common/params.h"
#include "launcher/preflight.h"

namespace tmpi::launch {

namespace {

using nlohmann::json;

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

}  // namespace

std::map<std::string, std::string> launch_environment(const Job& job, LaunchAddresses addresses) {
  std::map<std::string, std::string> env = job.env;
  std::vector<std::string>& own = addresses.launcher;
  // Its pod IP (status.podIP, in hosts.json) goes first: a dual-stack cluster's first family,
  // as the cluster chose it, rather than whichever address sorts first.
  if (job.topology.launcher) {
    auto primary = std::find(own.begin(), own.end(), job.topology.launcher->address);
    if (primary != own.end()) std::rotate(own.begin(), primary, own.end());
  }
  // The agents reach the coordinator at an address of the launcher's, not by its name
  // (preflight.h, coordinator_address).
  env[env_name(param::kCoordinator.name)] =
      coordinator_address(job.launcher_name, own, addresses.listening_on, addresses.rendezvous_port);
  if (!job.start_gate) return env;
  // MPI's ssh (mpi-ssh) runs over the check's connections where it can (ssh/relay.h).
  if (addresses.relay_socket) env[std::string(contract::kSshRelay)] = *addresses.relay_socket;
  // Without the relay the daemons start over ssh of their own, without the check's verdict
  // on their hosts: Open MPI's launch order then holds nothing, and the agents ask (job.h).
  if (!addresses.relay_socket) env[env_name(param::kStartGate.name)] = "true";
  return env;
}

json job_report(ReportParts parts, const std::optional<Failure>& failure) {
  json report = std::move(parts.snapshot);
  if (!failure) record_clean_exits(report["ranks"], parts.placement);
  report["phases"] = std::move(parts.phases);
  if (!parts.preflight.empty()) report["preflight"] = std::move(parts.preflight);
  report["exit"] = exit_record(failure);
  report["exit"]["seconds"] = parts.seconds;
  report["command"] = std::move(parts.command);
  if (!parts.fabric.is_null()) report["check"] = std::move(parts.fabric);
  return report;
}

}  // namespace tmpi::launch
