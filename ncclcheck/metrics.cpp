// See metrics.h.
#include "ncclcheck/metrics.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace tmpi::check {

double algbw_gbps(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double allreduce_busbw(double algbw, int ranks) {
  return ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0.0;
}

Expected<std::vector<std::uint64_t>> size_ladder(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                                 std::int64_t factor) {
  if (min_bytes < 4)
    return make_error(Exit::kUsage, "--min-bytes {}: must hold one float (4 bytes) or more", min_bytes);
  if (max_bytes < min_bytes) {
    return make_error(Exit::kUsage, "--max-bytes {} is below --min-bytes {}; raise --max-bytes", max_bytes,
                      min_bytes);
  }
  if (factor < 2) return make_error(Exit::kUsage, "--step-factor {}: must be 2 or more", factor);
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = min_bytes; size < max_bytes; size *= static_cast<std::uint64_t>(factor)) {
    sizes.push_back(size);
    if (size > max_bytes / static_cast<std::uint64_t>(factor)) break;
  }
  sizes.push_back(max_bytes);
  return sizes;
}

std::vector<std::vector<Pair>> pair_rounds(int hosts) {
  std::vector<std::vector<Pair>> rounds;
  if (hosts < 2) return rounds;
  int slots = hosts % 2 == 0 ? hosts : hosts + 1;  // an odd count gets a bye: slot `hosts`
  std::vector<int> ring(static_cast<std::size_t>(slots));
  for (int i = 0; i < slots; ++i) ring[static_cast<std::size_t>(i)] = i;
  for (int round = 0; round < slots - 1; ++round) {
    std::vector<Pair> pairs;
    for (int i = 0; i < slots / 2; ++i) {
      int a = ring[static_cast<std::size_t>(i)];
      int b = ring[static_cast<std::size_t>(slots - 1 - i)];
      if (a < hosts && b < hosts) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(std::move(pairs));
    std::rotate(ring.begin() + 1, ring.end() - 1, ring.end());  // slot 0 stays, the rest turn
  }
  return rounds;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double floor_for(const Threshold& threshold, double reference) {
  return std::max(threshold.min_gbps, threshold.min_fraction * reference);
}

double link_reference(const std::vector<LinkSample>& links, int hosts) {
  std::vector<double> best(static_cast<std::size_t>(std::max(hosts, 0)), -1.0);
  for (const auto& link : links) {
    for (int host : {link.hosts.first, link.hosts.second}) {
      if (host >= 0 && host < hosts)
        best[static_cast<std::size_t>(host)] = std::max(best[static_cast<std::size_t>(host)], link.gbps);
    }
  }
  std::vector<double> measured;
  for (double value : best) {
    if (value >= 0) measured.push_back(value);
  }
  return median(measured);
}

namespace {

bool slow(const LinkSample& link, double floor) {
  return link.gbps < floor || link.wrong > 0;
}

int host_count(const std::vector<LinkSample>& links) {
  int count = 0;
  for (const auto& link : links) count = std::max({count, link.hosts.first + 1, link.hosts.second + 1});
  return count;
}

std::string first_pass(const std::vector<LinkSample>& links, int host,
                       const std::vector<std::string>& names) {
  std::string out;
  for (const auto& link : links) {
    if (link.hosts.first != host && link.hosts.second != host) continue;
    int other = link.hosts.first == host ? link.hosts.second : link.hosts.first;
    out += fmt::format("{}{:.3g} GB/s with {}", out.empty() ? "" : ", ", link.gbps,
                       names.at(static_cast<std::size_t>(other)));
  }
  return out;
}

}  // namespace

// A suspect has no good link at all; a host (or GPU) with one good link can move data at
// full speed, so its slow links are the links' fault (or the other end's).
std::set<int> suspects(const std::vector<LinkSample>& links, double floor, int hosts) {
  std::vector<bool> measured(static_cast<std::size_t>(hosts), false),
      good(static_cast<std::size_t>(hosts), false);
  for (const auto& link : links) {
    for (int host : {link.hosts.first, link.hosts.second}) {
      if (host < 0 || host >= hosts) continue;
      measured[static_cast<std::size_t>(host)] = true;
      if (!slow(link, floor)) good[static_cast<std::size_t>(host)] = true;
    }
  }
  std::set<int> out;
  for (int host = 0; host < hosts; ++host) {
    if (measured[static_cast<std::size_t>(host)] && !good[static_cast<std::size_t>(host)]) out.insert(host);
  }
  return out;
}

std::vector<std::vector<Pair>> second_look_rounds(const std::vector<LinkSample>& links, double floor,
                                                  bool alone) {
  std::vector<Pair> waiting;
  for (const auto& link : links) {
    if (link.gbps < floor && link.wrong == 0) waiting.push_back(link.hosts);
  }
  std::vector<std::vector<Pair>> rounds;
  while (!waiting.empty()) {  // greedy: each pair in the first round where both ends are free
    std::vector<Pair> round, later;
    std::set<int> busy;
    for (const auto& pair : waiting) {
      if ((alone && !round.empty()) || busy.contains(pair.first) || busy.contains(pair.second)) {
        later.push_back(pair);
        continue;
      }
      busy.insert({pair.first, pair.second});
      round.push_back(pair);
    }
    rounds.push_back(std::move(round));
    waiting = std::move(later);
  }
  return rounds;
}

void merge_second_look(std::vector<LinkSample>& links, const std::vector<LinkSample>& second) {
  for (auto& link : links) {
    for (const auto& again : second) {
      if (again.hosts != link.hosts) continue;
      link.gbps = std::max(link.gbps, again.gbps);
      link.stall = std::max(link.stall, again.stall);  // a link that stopped once is not cleared
      link.wrong += again.wrong;
    }
  }
}

std::vector<std::vector<Pair>> retest_rounds(const std::vector<LinkSample>& links, double floor, int hosts,
                                             const std::set<int>& more) {
  std::set<int> suspect_hosts = suspects(links, floor, hosts);
  suspect_hosts.insert(more.begin(), more.end());
  std::vector<int> good;
  for (int host = 0; host < hosts; ++host) {
    if (!suspect_hosts.contains(host)) good.push_back(host);
  }
  std::vector<std::vector<Pair>> rounds;
  if (suspect_hosts.empty() || good.empty()) return rounds;
  // Each round pairs as many suspects as there are good hosts; a host is in one pair a round.
  std::vector<int> waiting(suspect_hosts.begin(), suspect_hosts.end());
  while (!waiting.empty()) {
    std::vector<Pair> round;
    for (std::size_t i = 0; i < good.size() && !waiting.empty(); ++i) {
      int suspect = waiting.front();
      waiting.erase(waiting.begin());
      round.emplace_back(std::min(suspect, good[i]), std::max(suspect, good[i]));
    }
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<Culprit> judge_links(const std::vector<LinkSample>& links, const std::vector<LinkSample>& retests,
                                 double floor, const std::vector<std::string>& host_names) {
  auto name = [&](int host) { return host_names.at(static_cast<std::size_t>(host)); };
  std::vector<Culprit> out;
  std::set<int> bad_hosts;
  std::set<int> suspect_hosts = suspects(links, floor, host_count(links));
  for (int host : suspect_hosts) {
    for (const auto& retest : retests) {
      if (retest.hosts.first != host && retest.hosts.second != host) continue;
      if (!slow(retest, floor)) break;  // fine beside a good peer: not this host
      int peer = retest.hosts.first == host ? retest.hosts.second : retest.hosts.first;
      out.push_back({"host", name(host),
                     fmt::format("{:.3g} GB/s beside the good peer {} (retest){}, below the floor of {:.3g} "
                                 "GB/s; first pass: {}",
                                 retest.gbps, name(peer),
                                 retest.wrong > 0 ? fmt::format(", {} wrong elements", retest.wrong) : "",
                                 floor, first_pass(links, host, host_names))});
      bad_hosts.insert(host);
      break;
    }
  }
  for (const auto& link : links) {
    if (!slow(link, floor) || bad_hosts.contains(link.hosts.first) || bad_hosts.contains(link.hosts.second))
      continue;
    bool ends_good = !suspect_hosts.contains(link.hosts.first) && !suspect_hosts.contains(link.hosts.second);
    out.push_back({"link", fmt::format("{} <-> {}", name(link.hosts.first), name(link.hosts.second)),
                   fmt::format("{:.3g} GB/s{}, below the floor of {:.3g} GB/s; {}", link.gbps,
                               link.wrong > 0 ? fmt::format(", {} wrong elements", link.wrong) : "", floor,
                               ends_good ? "both ends are fast with other hosts, so the link itself is slow"
                                         : "no host is fast enough to tell the link from its ends")});
  }
  return out;
}

std::vector<Culprit> judge_gpus(const std::vector<LinkSample>& links, double floor,
                                const std::vector<std::string>& gpu_names) {
  int count = static_cast<int>(gpu_names.size());
  std::set<int> slow_gpus = count >= 3 ? suspects(links, floor, count) : std::set<int>{};
  if (static_cast<int>(slow_gpus.size()) == count) slow_gpus.clear();  // nothing fast to compare with
  std::vector<Culprit> out;
  out.reserve(slow_gpus.size());
  for (int gpu : slow_gpus) {
    out.push_back({"gpu", gpu_names.at(static_cast<std::size_t>(gpu)),
                   fmt::format("every link of it is below the floor of {:.3g} GB/s: {}", floor,
                               first_pass(links, gpu, gpu_names))});
  }
  for (const auto& link : links) {
    if (!slow(link, floor) || slow_gpus.contains(link.hosts.first) || slow_gpus.contains(link.hosts.second))
      continue;
    out.push_back({"gpu link",
                   fmt::format("{} <-> {}", gpu_names.at(static_cast<std::size_t>(link.hosts.first)),
                               gpu_names.at(static_cast<std::size_t>(link.hosts.second))),
                   fmt::format("{:.3g} GB/s{}, below the floor of {:.3g} GB/s", link.gbps,
                               link.wrong > 0 ? fmt::format(", {} wrong elements", link.wrong) : "", floor)});
  }
  return out;
}

std::vector<Culprit> judge_gpu_data(const std::vector<LinkSample>& links,
                                    const std::vector<std::string>& gpu_names) {
  std::vector<Culprit> out;
  for (const auto& link : links) {
    if (link.wrong == 0) continue;
    out.push_back({"gpu link",
                   fmt::format("{} <-> {}", gpu_names.at(static_cast<std::size_t>(link.hosts.first)),
                               gpu_names.at(static_cast<std::size_t>(link.hosts.second))),
                   fmt::format("{} wrong elements", link.wrong)});
  }
  return out;
}

std::vector<Culprit> judge_nodes(const std::vector<NodeSample>& nodes, const Threshold& threshold,
                                 const std::vector<std::string>& host_names) {
  std::vector<double> values;
  values.reserve(nodes.size());
  for (const auto& node : nodes) values.push_back(node.busbw);
  double reference = median(values);
  double floor = floor_for(threshold, reference);
  std::vector<Culprit> out;
  for (const auto& node : nodes) {
    if (node.busbw >= floor && node.wrong == 0) continue;
    out.push_back(
        {"node", host_names.at(static_cast<std::size_t>(node.host)),
         fmt::format(
             "intra-node all-reduce {:.3g} GB/s busbw{}, below the floor of {:.3g} GB/s (median host {:.3g})",
             node.busbw, node.wrong > 0 ? fmt::format(", {} wrong elements", node.wrong) : "", floor,
             reference)});
  }
  return out;
}

}  // namespace tmpi::check
