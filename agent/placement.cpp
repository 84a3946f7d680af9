// See agent/placement.h. Pure functions of the environment and the host name, so that every
// case (a wrapped layout, a short list, a name with or without its domain) is unit-tested.
#include "agent/placement.h"

#include <cstdio>
#include <sstream>
#include <utility>

#include "agent/contract.h"

namespace tmpi::launch {

namespace {

std::string_view short_of(std::string_view name) {
  return name.substr(0, name.find('.'));
}

}  // namespace

int layout_host(int rank, std::string_view layout) {
  std::vector<std::pair<int, int>> runs;  // (slots, hosts)
  long long total = 0;
  std::istringstream in{std::string(layout)};
  for (std::string run; std::getline(in, run, ',');) {
    int slots = 0, hosts = 0;
    if (std::sscanf(run.c_str(), "%dx%d", &slots, &hosts) == 2 && slots > 0 && hosts > 0 &&
        slots <= 1 << 20 && hosts <= 1 << 20) {
      runs.emplace_back(slots, hosts);
      total += static_cast<long long>(slots) * hosts;
    }
  }
  if (total <= 0 || rank < 0) return -1;
  long long offset = rank % total;
  int host = 0;
  for (const auto& [slots, hosts] : runs) {
    if (offset < static_cast<long long>(slots) * hosts) return host + static_cast<int>(offset / slots);
    offset -= static_cast<long long>(slots) * hosts;
    host += hosts;
  }
  return -1;
}

std::string join_hosts(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

std::optional<Misplacement> misplaced(int rank, const std::map<std::string, std::string>& env,
                                      const std::string& hostname) {
  auto layout = env.find(std::string(contract::kSlotLayout));
  auto hosts = env.find(std::string(contract::kRankHosts));
  if (layout == env.end() || hosts == env.end() || hostname.empty()) return std::nullopt;
  int index = layout_host(rank, layout->second);
  if (index < 0) return std::nullopt;
  std::string_view list = hosts->second;
  for (int i = 0; i < index; ++i) {
    std::size_t comma = list.find(',');
    if (comma == std::string_view::npos) return std::nullopt;  // a shorter list than the layout
    list.remove_prefix(comma + 1);
  }
  std::string_view expected = list.substr(0, list.find(','));
  if (expected.empty() || short_of(expected) == short_of(hostname)) return std::nullopt;
  return Misplacement{std::string(expected), hostname};
}

}  // namespace tmpi::launch
