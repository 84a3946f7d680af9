// The launcher's checks before a multi-hour job starts: every host name resolves (its own
// included, Trainer #3783), and every sshd accepts the job key with the pinned host key (in
// parallel, with bounded concurrency). Where ranks land (Open MPI 5 running every rank on the
// launcher, Trainer #4028) is checked by each rank's agent as the job starts
// (rank_placement.h); `--placement probe` adds the old check, a tiny MPI job before the real
// one, which `mpi-launcher check` always runs. Failures are rows of a table: host, check, reason.
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
// The row of a rank that ran on `actual`, not on `expected`: from the probe, or an agent.
CheckRow misplaced_row(int rank, const std::string& actual, const std::string& expected);
// How many ranks the probe's output says where they ran: when all have, the probe is done.
int ranks_reported(const std::string& output);

std::string render_table(const std::vector<CheckRow>& rows);

}  // namespace tmpi::launch
