// See cpus.h.
#include "ncclcheck/cpus.h"

#include <sched.h>

#include <charconv>

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

}  // namespace

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
