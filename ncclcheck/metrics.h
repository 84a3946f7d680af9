// The arithmetic of nccl-check, free of MPI, CUDA and I/O so that unit tests drive it:
// bandwidth (nccl-tests' definitions), the ladder of sizes, the schedule of pair tests, and
// the thresholds that turn samples into culprits.
//
// Bandwidth, as nccl-tests' PERFORMANCE.md defines it: algbw = bytes / time, in GB/s of
// 10^9 bytes; for all-reduce, busbw = algbw * 2(n-1)/n, the traffic each link carries, which
// is comparable across rank counts and with the hardware's peak.
//
// Thresholds: a sample fails below max(--min-busbw, --min-fraction x reference). The
// reference of pair tests is the median over hosts of each host's best link: each host's
// best link shows what it can do, and the median over hosts ignores a minority of bad ones
// (a plain median of links would not: with 3 hosts and 1 bad, 2 of 3 links are slow).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tmpi::check {

double algbw_gbps(std::uint64_t bytes, double seconds);
double allreduce_busbw(double algbw, int ranks);

// min, min*factor, ... up to max (max itself always included); errors name the flags.
Expected<std::vector<std::uint64_t>> size_ladder(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                                 std::int64_t factor);

// Every pair of `hosts` hosts exactly once, each host at most once per round, in the fewest
// rounds: hosts-1 when even, hosts when odd (the circle method of round-robin tournaments).
using Pair = std::pair<int, int>;  // host indices, first < second
std::vector<std::vector<Pair>> pair_rounds(int hosts);

double median(std::vector<double> values);

struct Threshold {
  double min_gbps = 0;        // --min-busbw: an absolute floor, 0 = none
  double min_fraction = 0.5;  // --min-fraction of the reference
};
double floor_for(const Threshold& threshold, double reference);

struct LinkSample {
  Pair hosts;
  double gbps = 0;
  std::int64_t wrong = 0;
  std::uint64_t bytes = 0;  // per transfer, where the time budget chose (budget.h); 0: not recorded
  double stall = 0;         // seconds the link stopped in one iteration (stalls.h); 0: none
};

// The median over hosts of each host's best link (see the top of this file).
double link_reference(const std::vector<LinkSample>& links, int hosts);

// The suspects: of `hosts` hosts (or GPUs), those that have no fast link at all.
std::set<int> suspects(const std::vector<LinkSample>& links, double floor, int hosts);

// The second pass (after cluster-health-scanner): each suspect host (one whose every link
// is slow) is tested again beside a good host (one with a fast link), in rounds of disjoint
// pairs. Empty when there is no suspect, or no good host to compare with. `more`: further
// suspects, chosen by the caller (the hosts of links that stopped: stalls.h).
std::vector<std::vector<Pair>> retest_rounds(const std::vector<LinkSample>& links, double floor, int hosts,
                                             const std::set<int>& more = {});

// The second look: every slow sample (below the floor, its data right) is measured once
// more, in rounds of disjoint pairs, before anything is judged, so that one sample that
// the scheduler or a neighbour slowed blames nothing. Wrong data is never noise: it is not
// measured again. Empty when nothing is slow. `alone`: one pair a round, for the GPUs of
// one host, whose pairs share the host's CPUs, memory and switches (two pairs of 4 ranks
// on 2 cores were each seen at half the speed of the round before); else disjoint pairs
// share a round, as links between hosts do.
std::vector<std::vector<Pair>> second_look_rounds(const std::vector<LinkSample>& links, double floor,
                                                  bool alone = false);

// Each sample with its second look, if it had one: the better speed, the wrong elements of
// both.
void merge_second_look(std::vector<LinkSample>& links, const std::vector<LinkSample>& second);

struct Culprit {
  std::string kind;  // "host", "link", "node" (intra-node), "world", "data", "gpu"
  std::string name;  // a host name, "a <-> b", or "world"
  std::string reason;
};

// Culprits from both passes: a suspect host whose retest beside a good peer is slow too; a
// slow link that no such host explains (both ends fast elsewhere, or nothing to compare).
std::vector<Culprit> judge_links(const std::vector<LinkSample>& links, const std::vector<LinkSample>& retests,
                                 double floor, const std::vector<std::string>& host_names);

// The GPUs of one host, from the links between each pair of them (indices are local ranks,
// names say "host GPU 3 (0000:19:00.0)"): with 3 or more, a GPU whose every link is slow is
// named; a slow link between two GPUs that are fast elsewhere is named as a link. Two GPUs
// cannot be told apart: their slow link is named.
std::vector<Culprit> judge_gpus(const std::vector<LinkSample>& links, double floor,
                                const std::vector<std::string>& gpu_names);

// Intra-node samples, one per host (hosts with one rank have none): below the floor fails.
struct NodeSample {
  int host = 0;
  double busbw = 0;
  std::int64_t wrong = 0;
};
// The links of a host whose bandwidth is not judged (its ranks share CPUs, cpus.h): only
// their data, which no scheduler excuses.
std::vector<Culprit> judge_gpu_data(const std::vector<LinkSample>& links,
                                    const std::vector<std::string>& gpu_names);

std::vector<Culprit> judge_nodes(const std::vector<NodeSample>& nodes, const Threshold& threshold,
                                 const std::vector<std::string>& host_names);

}  // namespace tmpi::check
