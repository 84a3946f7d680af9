// See cpus.h.
#include "ncclcheck/cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>

#include <fmt/format.h>

namespace tmpi::check {

namespace {

// One number of a list part, the whole of `text`; -1 when it is not one in range.
int cpu_number(std::string_view text) {
  int value = -1;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || at != end || value < 0 || value >= kMaxCpu) return -1;
  return value;
}

// A boot id as the kernel writes it: 36 characters of lower-case hex and four dashes.
bool is_boot_id(std::string_view text) {
  constexpr std::size_t kLength = 36;
  if (text.size() != kLength) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = text[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string own_machine_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(file, id)) return "";
  return is_boot_id(id) ? id : "";
}

std::string own_affinity_text() {
  return own_machine_id() + " " + own_cpu_list();
}

Affinity parse_affinity(std::string_view text) {
  std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return {"", parse_cpu_list(text)};
  std::string_view machine = text.substr(0, space);
  return {is_boot_id(machine) ? std::string(machine) : "", parse_cpu_list(text.substr(space + 1))};
}

std::vector<CpuShare> cpu_shares(const std::vector<std::vector<Affinity>>& ranks_of_host) {
  // Each host's machine: its ranks' boot id when they agree on one, else the host alone.
  std::vector<std::string> machine_of(ranks_of_host.size());
  for (std::size_t h = 0; h < ranks_of_host.size(); ++h) {
    const auto& ranks = ranks_of_host[h];
    bool agreed = !ranks.empty() && !ranks.front().machine.empty() &&
                  std::all_of(ranks.begin(), ranks.end(),
                              [&](const Affinity& rank) { return rank.machine == ranks.front().machine; });
    machine_of[h] = agreed ? ranks.front().machine : fmt::format("host {}", h);
  }
  struct Machine {
    std::size_t ranks = 0, hosts = 0;
    std::set<int> cpus;
  };
  std::map<std::string, Machine> machines;
  for (std::size_t h = 0; h < ranks_of_host.size(); ++h) {
    Machine& machine = machines[machine_of[h]];
    machine.ranks += ranks_of_host[h].size();
    machine.hosts += 1;
    for (const auto& rank : ranks_of_host[h]) machine.cpus.insert(rank.cpus.begin(), rank.cpus.end());
  }
  std::vector<CpuShare> shares;
  for (const auto& name : machine_of) {
    const Machine& machine = machines.at(name);
    shares.push_back({machine.cpus.size(), machine.ranks, machine.hosts,
                      ranks_share_cpus(machine.ranks, machine.cpus.size())});
  }
  return shares;
}

std::string own_cpu_list() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return "";
  std::set<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.insert(cpu);
  }
  return cpu_list(cpus);
}

std::string cpu_list(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int first = *it, last = *it;
    for (++it; it != cpus.end() && *it == last + 1; ++it) last = *it;
    out += fmt::format("{}{}", out.empty() ? "" : ",",
                       first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  return out;
}

std::set<int> parse_cpu_list(std::string_view text) {
  std::set<int> cpus;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::size_t dash = part.find('-');
    int first = cpu_number(part.substr(0, dash));
    int last = dash == std::string_view::npos ? first : cpu_number(part.substr(dash + 1));
    if (first < 0 || last < first) continue;
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

}  // namespace tmpi::check
