// Where a rank belongs, as the rank agent sees it: the host index of a rank from the slot
// layout, and the placement check that each agent makes before it starts its rank.
//
// Why in the agent: the launcher used to check placement with a whole extra MPI job
// (`hostname` under mpirun) before the real one, which cost as much as a second launch and
// grew with the job's size. The agents already know their rank, their host and the layout, so
// the job checks itself: an agent on another host than the hostfile gives its rank (Open MPI
// 5 running every rank on the launcher when the hostfile is not read, a hostfile rewritten
// after the preflight, a --map-by that disagrees) does not start the rank, reports
// "misplaced" to the coordinator, and exits 69; the launcher stops the job and prints the
// preflight's table. The launcher passes the layout (TMPI_SLOT_LAYOUT) and the hosts in
// hostfile order (TMPI_RANK_HOSTS) to every rank; an agent without both checks nothing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmpi::launch {

// The longest TMPI_RANK_HOSTS the launcher passes (the kernel takes 128 KiB for one variable,
// and the rank's own environment needs room too); past that, the probe job checks instead.
inline constexpr std::size_t kMaxRankHostsBytes = 64 * 1024;

// The index, in hostfile order, of the host that by-slot mapping gives `rank`, round after
// round when there are more ranks than slots; -1 when `layout` ("8x96,4x32": slots x hosts,
// run-length coded) holds no slot.
int layout_host(int rank, std::string_view layout);

// {"a", "b", "c"} -> "a,b,c": TMPI_RANK_HOSTS, as the launcher passes it.
std::string join_hosts(const std::vector<std::string>& names);

struct Misplacement {
  std::string expected;  // the host the hostfile gives the rank
  std::string actual;    // where it runs
};

// Whether this rank runs elsewhere than its host (short names compared, since the pod's own
// name is short and hosts.json has the FQDN); nullopt when it is in place, or when the
// environment does not say where it belongs (no layout or host list, or ones that disagree).
std::optional<Misplacement> misplaced(int rank, const std::map<std::string, std::string>& env,
                                      const std::string& hostname);

}  // namespace tmpi::launch
