// See fabric_timeout.h.
#include "launcher/fabric_timeout.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/json_fields.h"

namespace tmpi::launch {

std::string short_host(const std::string& name) {
  return name.substr(0, name.find('.'));
}

namespace {

// Who saw whom silent, by host: the views read as input from outside (they came through
// mpirun's output), each rank placed by the placement check where it can be.
struct Views {
  std::set<std::string> hosts;                       // every host of the job
  std::set<std::string> spoke;                       // hosts with a rank that gave its view
  std::set<std::string> alive;                       // hosts with a rank that said anything
  std::map<std::string, std::set<std::string>> saw;  // host -> the hosts it saw silent
};

Views read_views(const std::vector<nlohmann::json>& views, const std::vector<std::string>& placement) {
  Views out;
  auto host_of = [&](std::int64_t rank, const std::string& fallback) {
    bool placed = rank >= 0 && rank < static_cast<std::int64_t>(placement.size());
    return placed ? short_host(placement[static_cast<std::size_t>(rank)]) : fallback;
  };
  for (const auto& host : placement) out.hosts.insert(short_host(host));
  for (const auto& view : views) {
    std::int64_t rank = int_at(view, "/rank", -1);
    std::string host = host_of(rank, short_host(string_at(view, "/host")));
    if (host.empty()) continue;
    out.hosts.insert(host);
    out.alive.insert(host);
    const auto* silent = node_at(view, "/silent_ranks");
    if (silent == nullptr || !silent->is_array()) continue;  // in a blocking call: no pings answered
    out.spoke.insert(host);
    for (const auto& item : *silent) {
      if (!item.is_number_integer()) continue;
      std::string other = host_of(item.get<std::int64_t>(), fmt::format("rank {}", item.get<std::int64_t>()));
      if (other != host) out.saw[host].insert(other);
      out.hosts.insert(other);
    }
  }
  return out;
}

bool saw_silent(const Views& views, const std::string& who, const std::string& whom) {
  auto it = views.saw.find(who);
  return it != views.saw.end() && it->second.contains(whom);
}

// A host that spoke but that every other host that spoke saw silent (three or more spoke:
// with two, either end could be the one whose links are down).
std::set<std::string> cut_off(const Views& views) {
  std::set<std::string> out;
  if (views.spoke.size() < 3) return out;
  for (const auto& host : views.spoke) {
    bool all = true;
    for (const auto& other : views.spoke) {
      if (other != host && !saw_silent(views, other, host)) all = false;
    }
    if (all) out.insert(host);
  }
  return out;
}

}  // namespace

TimeoutVerdict localise_timeout(const std::vector<nlohmann::json>& views,
                                const std::vector<std::string>& placement, const std::string& backend,
                                const std::string& reason) {
  TimeoutVerdict out;
  Views seen = read_views(views, placement);
  if (seen.spoke.empty()) return out;
  bool fault_found = false;
  for (const auto& host : seen.hosts) {
    if (seen.alive.contains(host)) continue;
    out.rows.push_back({host, backend + " timeout", reason + "; this host does not answer"});
  }
  std::set<std::string> isolated = cut_off(seen);
  for (const auto& host : isolated) {
    out.rows.push_back({host, backend + " host",
                        reason + "; this host answers none of its peers' pings and hears none of them, while "
                                 "they hear each other: its own links are down"});
    fault_found = true;
  }
  for (auto a = seen.spoke.begin(); a != seen.spoke.end(); ++a) {
    for (auto b = std::next(a); b != seen.spoke.end(); ++b) {
      if (isolated.contains(*a) || isolated.contains(*b)) continue;
      if (!saw_silent(seen, *a, *b) && !saw_silent(seen, *b, *a)) continue;
      out.rows.push_back({fmt::format("{} <-> {}", *a, *b), backend + " link",
                          reason + "; these two hosts do not hear each other's pings, while each answers "
                                   "the others: the link between them drops"});
      fault_found = true;
    }
  }
  // A host whose ranks gave no view, only a line from a blocking MPI call, that every host
  // which gave one saw silent: its ranks answered no ping, and nothing else is at fault. So
  // it was stopped or frozen there; its line came when mpirun's abort woke it (SIGCONT).
  if (out.rows.empty()) {
    for (const auto& host : seen.alive) {
      if (seen.spoke.contains(host)) continue;
      bool silent_to_all = std::all_of(seen.spoke.begin(), seen.spoke.end(), [&](const std::string& other) {
        return saw_silent(seen, other, host);
      });
      if (!silent_to_all) continue;
      out.rows.push_back({host, backend + " timeout",
                          reason + "; this host does not answer (its ranks were in a blocking MPI call)"});
    }
  }
  if (out.rows.empty()) {
    std::string candidates = fmt::format("{}", fmt::join(seen.hosts, ", "));
    for (const auto& host : seen.hosts) {
      out.rows.push_back({host, backend + " not localised",
                          reason + fmt::format("; every rank answered every ping, so no host or link is "
                                               "known at fault: any of {} could be",
                                               candidates)});
    }
    fault_found = true;
  }
  out.exit = fault_found ? Exit::kUnavailable : Exit::kTempFail;
  return out;
}

}  // namespace tmpi::launch
