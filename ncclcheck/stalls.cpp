// See stalls.h.
#include "ncclcheck/stalls.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "ncclcheck/report.h"

namespace tmpi::check {

namespace {

// Every sample of one pair of hosts, over the passes: whether it stopped, or ran below the
// floor (a retest whose one sample fell in an outage, too slow for a second iteration).
struct PairState {
  double stall = 0;
  double slowest_gbps = 0;
  bool below_floor = false;
  bool bad() const { return is_stall(stall) || below_floor; }
};

std::map<Pair, PairState> pair_states(const std::vector<LinkSample>& links, double floor) {
  std::map<Pair, PairState> states;
  for (const auto& link : links) {
    auto [it, first] = states.try_emplace(link.hosts, PairState{link.stall, link.gbps, link.gbps < floor});
    if (first) continue;
    it->second.stall = std::max(it->second.stall, link.stall);
    it->second.slowest_gbps = std::min(it->second.slowest_gbps, link.gbps);
    it->second.below_floor = it->second.below_floor || link.gbps < floor;
  }
  return states;
}

// The host in every bad link, if the bad links single it out: two of its links bad, and
// some link without it clean. -1 otherwise.
int host_in_every_bad_link(const std::map<Pair, PairState>& states) {
  std::map<int, int> count;
  int bad = 0;
  for (const auto& [pair, state] : states) {
    if (!state.bad()) continue;
    ++bad;
    ++count[pair.first];
    ++count[pair.second];
  }
  for (const auto& [host, n] : count) {
    if (n != bad || n < 2) continue;
    for (const auto& [pair, state] : states) {
      if (pair.first != host && pair.second != host && !state.bad()) return host;
    }
  }
  return -1;
}

std::string describe(const Pair& pair, const PairState& state, const std::vector<std::string>& hosts) {
  std::string link = fmt::format("{} <-> {}", hosts.at(static_cast<std::size_t>(pair.first)),
                                 hosts.at(static_cast<std::size_t>(pair.second)));
  if (is_stall(state.stall)) return fmt::format("{} stopped {:.1f} s", link, state.stall);
  return fmt::format("{} at {:.3g} GB/s", link, state.slowest_gbps);
}

}  // namespace

IterationTimes summarize_iterations(const std::vector<double>& seconds) {
  IterationTimes times;
  if (seconds.empty()) return times;
  times.median = median(seconds);
  times.mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  double slowest = *std::max_element(seconds.begin(), seconds.end());
  if (slowest >= kStallFactor * times.median) times.stall = slowest - times.median;
  return times;
}

bool is_stall(double stall_seconds) {
  return stall_seconds >= kStallSeconds;
}

SweepStall longest_sweep_stall(const std::vector<SizeResult>& sizes) {
  SweepStall longest;
  for (const auto& size : sizes) {
    if (size.stall > longest.seconds) longest = {size.stall, size.bytes};
  }
  return longest;
}

PairChoice choose_retest_of_a_stop(const RetestOfAStop& retest, const std::vector<LinkSample>& first_pass,
                                   double floor, const Budgets& budgets, Iterations wanted) {
  double probe_seconds = retest.probe_seconds;
  for (const auto& link : first_pass) {
    if (link.hosts != retest.pair || link.gbps < floor || link.gbps <= 0) continue;
    probe_seconds = std::min(probe_seconds, retest.probe_seconds_at_1_gbps / link.gbps);
  }
  wanted.timed = std::numeric_limits<int>::max() / 2;  // the budget alone decides
  return choose_pair(retest.full, retest.probe, probe_seconds, kFillBudgets * budgets.step, budgets.sweep,
                     wanted);
}

std::set<int> hosts_of_stalled_links(const std::vector<LinkSample>& links) {
  std::set<int> hosts;
  for (const auto& link : links) {
    if (is_stall(link.stall)) hosts.insert({link.hosts.first, link.hosts.second});
  }
  return hosts;
}

std::vector<Culprit> judge_stalls(const std::vector<LinkSample>& links, double floor, const SweepStall& sweep,
                                  const std::vector<std::string>& hosts) {
  std::vector<Culprit> culprits;
  auto states = pair_states(links, floor);
  bool any_stall = std::any_of(states.begin(), states.end(),
                               [](const auto& entry) { return is_stall(entry.second.stall); });
  if (!any_stall) {
    if (!is_stall(sweep.seconds)) return culprits;
    std::string why = fmt::format(
        "the all-host all-reduce of {} stopped for {:.1f} s in one iteration, yet no test of one link "
        "stopped: a link that comes and goes between the tests; not localised, any of the {} hosts could be "
        "at fault",
        human_bytes(sweep.bytes), sweep.seconds, hosts.size());
    for (const auto& host : hosts) culprits.push_back({"not localised", host, why});
    return culprits;
  }
  std::vector<std::string> seen;
  std::set<int> candidates;
  for (const auto& [pair, state] : states) {
    if (!state.bad()) continue;
    seen.push_back(describe(pair, state, hosts));
    candidates.insert({pair.first, pair.second});
  }
  if (int host = host_in_every_bad_link(states); host >= 0) {
    culprits.push_back({"host", hosts.at(static_cast<std::size_t>(host)),
                        fmt::format("its links stopped while moving data, or fell below the floor of {:.3g} "
                                    "GB/s in their retest ({}), while a link without it ran clean: a port "
                                    "that flaps or drops",
                                    floor, fmt::join(seen, "; "))});
    return culprits;
  }
  std::vector<std::string> names;
  names.reserve(candidates.size());
  for (int host : candidates) names.push_back(hosts.at(static_cast<std::size_t>(host)));
  std::string why =
      fmt::format("links stopped while moving data ({}); not localised, any of {} could be at fault",
                  fmt::join(seen, "; "), fmt::join(names, ", "));
  for (const auto& name : names) culprits.push_back({"not localised", name, why});
  return culprits;
}

}  // namespace tmpi::check
