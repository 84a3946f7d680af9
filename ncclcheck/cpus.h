// The CPUs a host's ranks may run on, for the MPI backend's judgement of links within a host.
//
// In the MPI (CPU) twin a "GPU" is a rank, and the bandwidth between two ranks of one host is
// the work of their CPUs. When a host's ranks outnumber the CPUs they may run on (4 ranks on a
// 2-core machine, or ranks all bound to one core), two of them can share one CPU and take
// turns: their pair measures the scheduler, not the memory system, and one run differs from
// the next by 2x. Such a host's pairs are still measured and shown, but not judged, and the
// table says why. Open MPI's own rule is alike: it stops binding ranks to cores once they
// outnumber the cores, because it can no longer give each one its own.
//
// Hosts are pods, and pods of one job may share a machine: Kubernetes places them where they
// fit, and the cluster in a box runs every pod on one. Their ranks then take turns on the same
// CPUs even when each pod alone has a CPU per rank, so the count is made per machine. A
// machine is told by the kernel's boot id (/proc/sys/kernel/random/boot_id), which every
// container of a node reads alike, and no two running nodes share.
//
// Each rank says its machine and its affinity (sched_getaffinity) as one line, "BOOT_ID
// 0-3,8"; every rank unites the lists of each machine's ranks. The text crosses the network,
// so the parse is bounded and skips what it does not understand: a rank whose boot id is
// missing or malformed counts as a machine of its own host.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tmpi::check {

constexpr int kMaxCpu = 1 << 16;  // Linux's CONFIG_NR_CPUS tops out at 8192; anything beyond is noise

// This process's CPUs, as a list ("0-1"); "" when the kernel will not say.
std::string own_cpu_list();

// {0,1,2,3,8} -> "0-3,8".
std::string cpu_list(const std::set<int>& cpus);

// "0-3,8" -> {0,1,2,3,8}; malformed parts, and CPUs outside [0, kMaxCpu), are skipped.
std::set<int> parse_cpu_list(std::string_view text);

// Whether `ranks` ranks on `cpus` CPUs must share them; 0 CPUs means unknown: not shared.
inline bool ranks_share_cpus(std::size_t ranks, std::size_t cpus) {
  return cpus > 0 && ranks > cpus;
}

// This machine's boot id, lower-case; "" when the kernel will not say or it is not a UUID.
std::string own_machine_id();

// What a rank says of itself: "BOOT_ID CPU_LIST" ("" for either part that is unknown).
std::string own_affinity_text();

struct Affinity {
  std::string machine;  // a UUID, or "" when unknown
  std::set<int> cpus;
};

Affinity parse_affinity(std::string_view text);

// How one host's ranks share CPUs: with every rank of every host on its machine.
struct CpuShare {
  std::size_t cpus = 0;   // the CPUs its machine's ranks may run on; 0: unknown
  std::size_t ranks = 0;  // the ranks on its machine, its own and its neighbours'
  std::size_t hosts = 1;  // the hosts on its machine, itself included
  bool shared = false;    // ranks_share_cpus(ranks, cpus)
};

// One answer per host, from each host's ranks' affinities (ranks_of_host[h]).
std::vector<CpuShare> cpu_shares(const std::vector<std::vector<Affinity>>& ranks_of_host);

}  // namespace tmpi::check
