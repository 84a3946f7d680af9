// The two pure ends of `mpi-launcher run`'s launch, apart from its I/O so that unit tests
// build them from plain values: the environment that mpirun and the agents get (the job's
// own, plus where the coordinator listens and how the agents pass the start gate), and
// report.json, whichever way the job ended. run.cpp resolves, starts and writes; these decide
// what is said.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/failure.h"
#include "launcher/job.h"

namespace tmpi::launch {

// Where the agents reach the coordinator, and how the ssh step beside the launch reaches
// mpirun, decided once the relay has started or not.
struct LaunchAddresses {
  // The launcher's own addresses, as the preflight's DNS step (or the launch) resolved them;
  // empty: the agents get the name, and say what they find.
  std::vector<std::string> launcher;
  std::string listening_on;  // the coordinator's bind address: "::" or "0.0.0.0"
  int rendezvous_port = 0;
  std::optional<std::string> relay_socket;  // the ssh relay's (ssh/relay.h), when it started
};

// job.env, with the coordinator's address (the launcher's pod IP first: a dual-stack
// cluster's first family, as the cluster chose it), the relay's socket for mpi-ssh, and, when
// the ssh step runs beside the launch without the relay, the agents asked to pass the gate.
std::map<std::string, std::string> launch_environment(const Job& job, LaunchAddresses addresses);

// What report.json is built from.
struct ReportParts {
  nlohmann::json snapshot;             // the coordinator's {hosts, ranks} (JobRendezvous::snapshot)
  std::vector<std::string> placement;  // each rank's host as the hostfile says (expected_placement)
  nlohmann::json phases, preflight;    // phases_json(): the run's phases, the preflight's steps
  double seconds = 0;                  // since the launcher started
  std::vector<std::string> command;    // the MPI command line
  nlohmann::json fabric;               // nccl-check's report, or null
};

// report.json (docs/design.md). After a clean end, a rank that sent no report (it ended within
// 2 s of its start) is listed from mpirun's exit 0, on its hostfile host, "reported": false.
nlohmann::json job_report(ReportParts parts, const std::optional<Failure>& failure);

}  // namespace tmpi::launch
