// A link that stops: the fault that bandwidth alone misses. A flapping port, or one that
// drops packets now and then, moves data at full speed between its outages, so a test's
// median (which is right to ignore one round trip that the scheduler delayed) shows a
// healthy link. What gives it away is one iteration that takes seconds: TCP waits out its
// retransmission timer, NCCL's proxy waits for its peer.
//
// So every timed iteration is timed on its own, and a test keeps its stall: how far its
// slowest iteration ran past its median, where that is kStallFactor medians or more (less
// is the noise of a loaded host). A stall of kStallSeconds or more is a finding; the
// scheduler's delays on a shared host are tens of milliseconds, TCP's first retransmission
// alone is 200 ms, and a link that went away for a second or more is what this looks for.
//
// Each host at either end of a stalled link is retested beside a host whose links all ran
// clean, for two rounds' budgets (kFillBudgets). Judging (judge_stalls), after the
// bandwidth verdict, and only where it named nothing (a slow link explains its own stalls),
// where some link stopped; a link counts as bad if it stopped, or ran below the floor (a
// retest whose one sample fell in an outage):
// - one host in every bad link, and at least two of them, while a link without it ran
//   clean: that host;
// - otherwise (one bad link alone cannot say which end): not localised, the hosts of the
//   bad links as candidates;
// - no link stalled, but the world all-reduce did: the outage fell between the link tests;
//   not localised, every host a candidate.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ncclcheck/budget.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"

namespace tmpi::check {

inline constexpr double kStallSeconds = 1.0;
inline constexpr double kStallFactor = 10.0;
// The budget a retest of a stopped link fills: two rounds' worth, since the probe's
// prediction overstates a full-size iteration (one measured run took about half of what
// was asked), and a test must outlast the longest time the link stays up.
inline constexpr double kFillBudgets = 2.0;

// What a retest of a stopped link runs: as many iterations as kFillBudgets of the round's
// budget hold, planned from the faster of its own probe and the first pass's sample of the
// pair, where that was above the floor. The probe may itself fall in an outage: planned
// from it alone, the retest ran probe-sized tests that lasted milliseconds and saw no stop.
struct RetestOfAStop {
  std::uint64_t full = 0, probe = 0;   // bytes of a full-size test and of the probe
  double probe_seconds = 0;            // one iteration of the probe, as measured
  double probe_seconds_at_1_gbps = 0;  // one iteration of the probe at 1 GB/s, in this backend's GB/s
  Pair pair;
};
PairChoice choose_retest_of_a_stop(const RetestOfAStop& retest, const std::vector<LinkSample>& first_pass,
                                   double floor, const Budgets& budgets, Iterations wanted);

// One test's timed iterations, each in seconds.
struct IterationTimes {
  double median = 0;  // what a link test reports: robust to one delayed round trip
  double mean = 0;    // what the sweep reports, as nccl-tests does
  double stall = 0;   // slowest past median, where slowest >= kStallFactor x median; else 0
};
IterationTimes summarize_iterations(const std::vector<double>& seconds);

bool is_stall(double stall_seconds);

// The hosts at either end of a link that stopped: each is tested again beside a host whose
// links all ran clean, for kFillBudgets rounds' budgets (a flap is caught by a test that
// outlasts the link's longest time up).
std::set<int> hosts_of_stalled_links(const std::vector<LinkSample>& links);

// The world all-reduce's largest stall over its sizes (SizeResult::stall), and which size.
struct SweepStall {
  double seconds = 0;
  std::uint64_t bytes = 0;
};
SweepStall longest_sweep_stall(const std::vector<SizeResult>& sizes);

// Culprits from the stalls of the links between hosts (first pass, second look and
// retests: all of them) and of the sweep; empty when nothing stopped. Where a link stopped,
// a link below `floor` (a retest whose one sample fell in an outage) counts as bad too.
// `hosts`: every host's name.
std::vector<Culprit> judge_stalls(const std::vector<LinkSample>& links, double floor, const SweepStall& sweep,
                                  const std::vector<std::string>& hosts);

}  // namespace tmpi::check
