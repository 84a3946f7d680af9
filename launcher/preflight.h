// The launcher's checks before a multi-hour job starts: every host name resolves (its own
// included, Trainer #3783), every sshd accepts the job key with the pinned host key (in
// parallel, with bounded concurrency), and ranks land where the hostfile says (a tiny MPI
// job, which catches Open MPI 5 running every rank on the launcher, Trainer #4028).
// Failures are rows of a table: host, check, reason.
#pragma once

#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/topology.h"

namespace tmpi::launch {

struct CheckRow {
  std::string host, check, reason;
};

std::vector<CheckRow> check_dns(const std::vector<std::string>& names);
std::vector<CheckRow> check_ssh(const std::vector<std::string>& hosts, int port,
                                const std::string& private_key, int concurrency = 16,
                                Millis timeout = Millis(10000));

// Where rank r must run: hosts in hostfile order, each filled to its slots, round after
// round if np exceeds the slots (by-slot mapping, the default of Open MPI and hydra).
std::vector<std::string> expected_placement(const Topology& topology, int np);

// Parses `hostname` output tagged by rank ("[1,3]<stdout>:host" from Open MPI's
// --tag-output, "[3] host" from hydra's -prepend-rank) and compares it with the expected
// placement by short host name.
std::vector<CheckRow> check_placement(const std::vector<std::string>& expected, const std::string& output);
// How many ranks the probe's output says where they ran: when all have, the probe is done.
int ranks_reported(const std::string& output);

std::string render_table(const std::vector<CheckRow>& rows);

}  // namespace tmpi::launch
