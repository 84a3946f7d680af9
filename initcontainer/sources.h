// Where mpi-init learns the topology. Each source is a pure function from text (or flags)
// to a Topology, so unit tests and fuzzers drive them without files, pods or an API server.
#pragma once

#include "common/error.h"
#include "common/topology.h"

#include <optional>
#include <string>
#include <vector>

namespace tmpi::init {

struct SourceOptions {
  std::string jobset;                 // keep only this JobSet's pods; names static hosts
  std::string subdomain;              // static spec: default = jobset
  std::string launcher_job = "launcher";
  bool launcher_as_node = false;      // Trainer's runLauncherAsNode
  std::optional<int> slots;           // overrides per-pod GPU counts
};

// `kubectl get pods -o json` (a List or PodList), or one page of the API's pod list.
Expected<Topology> topology_from_pod_list(std::string_view json_text, std::string_view origin,
                                          const SourceOptions& options);

// An Open MPI / PRRTE ("host slots=N") or hydra ("host:N") hostfile.
Expected<Topology> topology_from_hostfile(std::string_view text, std::string_view origin,
                                          const SourceOptions& options);

// A static spec: replicated jobs in order, each "name=pods" or "name=jobsxpods".
Expected<Topology> topology_from_static(const std::vector<std::string>& replicated_jobs,
                                        const SourceOptions& options);

// Splits "<jobset>-<rjob>-<jobIdx>-<podIdx>[.sub]" into its parts; false if it has another shape.
bool parse_jobset_hostname(std::string_view name, std::string_view jobset, Host& out);

}  // namespace tmpi::init
