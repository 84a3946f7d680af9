// The job's topology: the hosts that run ranks, and the launcher. mpi-init builds it (from
// the API, a pod list, a hostfile or a static spec) and writes it as /etc/mpi/hosts.json,
// the one file that every other piece reads, and as hostfiles in every MPI dialect.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/error.h"

namespace tmpi {

// A pod's part in the job: hosts.json's "role" (read once, by parse_hosts_json, and written
// by render_hosts_json as spelt here), and mpi-init's --role (initcontainer/role.h).
enum class PodRole { kLauncher, kNode };
inline constexpr Spellings<PodRole, 2> kPodRoleSpellings{
    {{"launcher", PodRole::kLauncher}, {"node", PodRole::kNode}}};

struct Host {
  std::string name;     // FQDN as MPI sees it: "<jobset>-<rjob>-<jobIdx>-<podIdx>.<subdomain>"
  std::string address;  // pod IP; empty when the source has none (hostfile, static spec)
  int slots = 1;
  int gpus = 0;
  PodRole role = PodRole::kNode;
  std::string pod;    // pod name; empty when the source has none
  std::string group;  // replicated job
  int job_index = 0;
  int pod_index = 0;

  // "job-node-0-1" of "job-node-0-1.job": the pod's own hostname.
  std::string short_name() const { return name.substr(0, name.find('.')); }
};

// The bounds of a job, as the parameters have them (--slots, --np) and the API source does:
// whatever a hostfile, a pod list or hosts.json says beyond them is refused, so no sum of
// slots can overflow and no plan of ranks can take the memory of a pod.
inline constexpr int kMaxSlotsPerHost = 1048576;
inline constexpr int kMaxTotalSlots = 16777216;
inline constexpr std::size_t kMaxHosts = 100000;

struct Topology {
  std::string jobset;
  std::string subdomain;
  std::optional<Host> launcher;    // the launcher pod, whether or not it runs ranks
  std::vector<Host> hosts;         // the hosts that run ranks, in rank order
  std::vector<std::string> notes;  // what the source left out, and why

  int total_slots() const;  // at most kMaxTotalSlots once validated; never overflows
  // The names of `hosts`, in rank order: what the preflight, the wait and the launcher ask.
  std::vector<std::string> host_names() const;
  // Hosts and launcher, without duplicates: every name that needs a pinned host key.
  std::vector<Host> all_pods() const;
};

enum class Dialect { kOpenMpi, kHydra, kDeepSpeed };

std::string render_hostfile(const Topology& topology, Dialect dialect);
std::string render_hosts_json(const Topology& topology);
// discover_hosts.sh for Horovod elastic: prints "host:slots" lines.
std::string render_discover_hosts(const Topology& topology);

// Reads hosts.json; `origin` names the file in errors.
Expected<Topology> parse_hosts_json(std::string_view text, std::string_view origin);

// Checks the invariants every source must meet: unique names, slots >= 1, hosts.
Status validate_topology(const Topology& topology, std::string_view origin);

// The one check of names and addresses that reach hostfiles, known_hosts and scripts, from
// whatever source (a pod list, the API, a hostfile, hosts.json). A host name is an RFC 1123
// DNS name (labels of letters, digits and inner hyphens, 63 bytes each, 253 in all) or an IP
// address; an address is one that inet_pton reads (IPv4 or IPv6). Nothing else passes: no
// space, line break, '*', '$' or quote can reach a file or a shell.
bool valid_host_name(std::string_view name);
bool valid_address(std::string_view address);

}  // namespace tmpi
