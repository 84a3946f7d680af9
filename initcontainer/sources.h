// Where mpi-init learns the topology. Each source is a pure function from text (or flags)
// to a Topology, so unit tests and fuzzers drive them without files, pods or an API server.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/topology.h"

namespace tmpi::init {

struct SourceOptions {
  std::string jobset;     // keep only this JobSet's pods; names static hosts
  std::string subdomain;  // static spec: default = jobset
  std::string launcher_job = "launcher";
  bool launcher_as_node = false;  // Trainer's runLauncherAsNode
  std::optional<int> slots;       // overrides per-pod GPU counts
};

// The warning for hosts given fewer slots than the GPUs their pod spec holds (the gpus of a
// pod-list or API host; other sources know none), or nullopt: ranks would leave GPUs idle
// and nothing would say so. Trainer v2.3's MPI plugin counts slots from the TrainJob's own
// resourcesPerNode (pkg/runtime/framework/plugins/mpi/mpi.go), while the runtime's GPU limit
// stays in the merged pod spec: an SDK job that gives only cpu and memory gets 1 slot a host.
std::optional<std::string> slots_below_gpus(const Topology& topology);

// Pods from one or more pod lists: `kubectl get pods -o json` (a List), or the pages of
// the API's PodList. The API source reads page after page, and asks again while pods come.
class PodListReader {
 public:
  explicit PodListReader(SourceOptions options);
  PodListReader(const PodListReader&) = delete;
  PodListReader& operator=(const PodListReader&) = delete;
  ~PodListReader();

  // Reads one list; returns its metadata.continue token ("" on the last page). The text is
  // copied once into a padded buffer for simdjson; a PaddedText (a file) is parsed in place.
  Expected<std::string> add(std::string_view json_text, std::string_view origin);
  Expected<std::string> add(const PaddedText& json_text, std::string_view origin);
  // Host name -> pod IP ("" until it has one) of every live pod read so far.
  std::map<std::string, std::string> live_hosts() const;
  Expected<Topology> topology(std::string_view origin) const;

  struct Pod;

 private:
  SourceOptions options_;
  std::vector<Pod> pods_;
  std::set<std::string> jobsets_;
  std::vector<std::string> notes_;
};

// `kubectl get pods -o json` (a List or PodList) in one text.
Expected<Topology> topology_from_pod_list(std::string_view json_text, std::string_view origin,
                                          const SourceOptions& options);
Expected<Topology> topology_from_pod_list(const PaddedText& json_text, std::string_view origin,
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
