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
// Each rank says its affinity (sched_getaffinity) as a Linux CPU list, "0-3,8"; rank 0 unites
// the lists of a host's ranks. The text crosses the network, so the parse is bounded and
// skips what it does not understand.
#pragma once

#include <set>
#include <string>
#include <string_view>

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

}  // namespace tmpi::check
