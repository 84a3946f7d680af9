// See report.h.
#include "ncclcheck/report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "ncclcheck/stalls.h"

namespace tmpi::check {

using nlohmann::json;

int Report::exit_code() const {
  // A timeout is a retry's matter only where a rank fell silent (stopped, gone): one that
  // every rank answered after is the fabric's, and not localised (docs/design.md).
  if (timeout)
    return static_cast<int>(timeout->silent_ranks.empty() && !timeout->blocking ? Exit::kUnavailable
                                                                                : Exit::kTempFail);
  if (!failure.empty()) return static_cast<int>(failure_exit);
  if (!culprits.empty()) return static_cast<int>(Exit::kUnavailable);
  return 0;
}

std::string Report::result() const {
  switch (exit_code()) {
    case 0:
      return "pass";
    case static_cast<int>(Exit::kTempFail):
      return "timeout";
    case static_cast<int>(Exit::kUnavailable):
      return timeout ? "not localised" : "fail";
    default:
      return "fail";
  }
}

std::string Report::gpu_name(int host, int local_rank) const {
  const HostInfo& info = hosts.at(static_cast<std::size_t>(host));
  const auto& devices = info.devices;
  if (devices.is_array() && local_rank < static_cast<int>(devices.size())) {
    const auto& device = devices[static_cast<std::size_t>(local_rank)];
    return fmt::format("{} GPU {} ({})", info.name, device.value("device", local_rank),
                       device.value("pci_bus_id", "?"));
  }
  return fmt::format("{} rank {}", info.name, local_rank);
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{} {}", bytes, units[unit]);
}

std::vector<std::string> hosts_of_ranks(const Report& report, const std::vector<int>& host_of,
                                        const std::vector<int>& ranks) {
  std::set<std::string> names;
  for (int rank : ranks) {
    if (rank >= 0 && rank < static_cast<int>(host_of.size())) {
      names.insert(report.hosts.at(static_cast<std::size_t>(host_of[static_cast<std::size_t>(rank)])).name);
    } else {
      names.insert(fmt::format("rank {}", rank));
    }
  }
  return {names.begin(), names.end()};
}

json to_json(const Report& report) {
  auto host_name = [&](int index) { return report.hosts.at(static_cast<std::size_t>(index)).name; };
  auto links = [&](const std::vector<LinkSample>& samples) {
    json out = json::array();
    for (const auto& link : samples) {
      out.push_back({{"hosts", {host_name(link.hosts.first), host_name(link.hosts.second)}},
                     {"gbps", link.gbps},
                     {"wrong", link.wrong},
                     {"stall_seconds", link.stall}});
    }
    return out;
  };
  json out = {{"result", report.result()},
              {"exit_code", report.exit_code()},
              {"backend", backend_name(report.backend)},
              {"library", report.library},
              {"ranks", report.ranks},
              {"seconds", report.seconds},
              {"pair_bytes", report.pair_bytes},
              {"link_floor_gbps", report.link_floor}};
  out["hosts"] = json::array();
  for (const auto& host : report.hosts) {
    out["hosts"].push_back({{"name", host.name},
                            {"ranks", host.ranks},
                            {"devices", host.devices},
                            {"cpus", host.cpus},
                            {"machine_ranks", host.machine_ranks},
                            {"machine_hosts", host.machine_hosts},
                            {"bandwidth_judged", !host.shares_cpus}});
  }
  out["allreduce"] = json::array();
  for (const auto& size : report.allreduce) {
    out["allreduce"].push_back({{"bytes", size.bytes},
                                {"seconds", size.seconds},
                                {"algbw_gbps", size.algbw},
                                {"busbw_gbps", size.busbw},
                                {"wrong", size.wrong},
                                {"iterations", size.iterations},
                                {"stall_seconds", size.stall}});
  }
  out["allreduce_skipped"] = json::array();
  for (const auto& size : report.skipped) {
    out["allreduce_skipped"].push_back(
        {{"bytes", size.bytes}, {"predicted_seconds", size.predicted}, {"budget_left_seconds", size.left}});
  }
  out["intra_node"] = json::array();
  for (const auto& node : report.nodes) {
    out["intra_node"].push_back(
        {{"host", host_name(node.host)}, {"busbw_gbps", node.busbw}, {"wrong", node.wrong}});
  }
  out["links"] = links(report.links);
  out["retests"] = links(report.retests);
  out["gpu_links"] = json::array();
  for (const auto& gpu : report.gpu_links) {
    out["gpu_links"].push_back({{"host", host_name(gpu.host)},
                                {"local_ranks", {gpu.link.hosts.first, gpu.link.hosts.second}},
                                {"gbps", gpu.link.gbps},
                                {"wrong", gpu.link.wrong}});
  }
  out["gpu_floor_gbps"] = report.gpu_floor;
  out["culprits"] = json::array();
  for (const auto& culprit : report.culprits) {
    out["culprits"].push_back({{"kind", culprit.kind}, {"name", culprit.name}, {"reason", culprit.reason}});
  }
  if (report.timeout) {
    const Timeout& t = *report.timeout;
    out["timeout"] = {
        {"step", t.step},        {"after_seconds", t.after_seconds}, {"rank", t.rank},
        {"host", t.host},        {"silent_hosts", t.silent_hosts},   {"silent_ranks", t.silent_ranks},
        {"blocking", t.blocking}};
  }
  if (!report.failure.empty()) out["failure"] = report.failure;
  return out;
}

std::string render_table(const Report& report) {
  std::string out = fmt::format("# nccl-check ({}): {} rank(s) on {} host(s); {}\n",
                                backend_name(report.backend), report.ranks, report.hosts.size(),
                                report.library.empty() ? "no library started" : report.library);
  if (!report.allreduce.empty()) {
    out += fmt::format("# all-reduce, float sum, out of place\n#{:>14} {:>12} {:>10} {:>10} {:>8}\n", "size",
                       "time(us)", "algbw", "busbw", "#wrong");
    out += fmt::format("#{:>14} {:>12} {:>10} {:>10} {:>8}\n", "(B)", "", "(GB/s)", "(GB/s)", "");
    for (const auto& size : report.allreduce) {
      out += fmt::format(" {:>14} {:>12.1f} {:>10.2f} {:>10.2f} {:>8}\n", size.bytes, size.seconds * 1e6,
                         size.algbw, size.busbw, size.wrong);
    }
    for (const auto& size : report.allreduce) {
      if (is_stall(size.stall)) {
        out += fmt::format("# all-reduce of {}: one iteration stopped for {:.1f} s\n",
                           human_bytes(size.bytes), size.stall);
      }
    }
  }
  for (const auto& size : report.skipped) {
    out += fmt::format(
        "# skipped all-reduce of {}: one iteration would take {:.3g} s, past the {:.3g} s left "
        "of the sweep's budget\n",
        human_bytes(size.bytes), size.predicted, std::max(size.left, 0.0));
  }
  for (const auto& host : report.hosts) {
    if (!host.shares_cpus) continue;
    std::string beside = host.machine_hosts > 1
                             ? fmt::format(" (its machine's, with {} other host(s))", host.machine_hosts - 1)
                             : "";
    out += fmt::format(
        "# host {}: {} ranks share {} CPU(s){}: bandwidth within it is the scheduler's, shown, not judged\n",
        host.name, std::max<std::size_t>(host.ranks.size(), static_cast<std::size_t>(host.machine_ranks)),
        host.cpus, beside);
  }
  for (const auto& node : report.nodes) {
    out += fmt::format("# intra-node {:<40} busbw {:>8.2f} GB/s  #wrong {}\n",
                       report.hosts.at(static_cast<std::size_t>(node.host)).name, node.busbw, node.wrong);
  }
  auto link_lines = [&](const std::vector<LinkSample>& links, const char* label) {
    for (const auto& link : links) {
      out += fmt::format("# {} {} <-> {}: {:.3f} GB/s  #wrong {}{}{}\n", label,
                         report.hosts.at(static_cast<std::size_t>(link.hosts.first)).name,
                         report.hosts.at(static_cast<std::size_t>(link.hosts.second)).name, link.gbps,
                         link.wrong, link.gbps < report.link_floor ? "  SLOW" : "",
                         is_stall(link.stall) ? fmt::format("  STOPPED {:.1f} s", link.stall) : "");
    }
  };
  for (const auto& gpu : report.gpu_links) {
    out += fmt::format(
        "# gpu link {} <-> {}: {:.3f} GB/s  #wrong {}{}\n", report.gpu_name(gpu.host, gpu.link.hosts.first),
        report.gpu_name(gpu.host, gpu.link.hosts.second), gpu.link.gbps, gpu.link.wrong,
        gpu.link.gbps < report.gpu_floor && !report.hosts.at(static_cast<std::size_t>(gpu.host)).shares_cpus
            ? "  SLOW"
            : "");
  }
  link_lines(report.links, "link");
  link_lines(report.retests, "retest");
  if (!report.links.empty()) {
    out += fmt::format("# link floor {:.3f} GB/s ({} per test)\n", report.link_floor,
                       human_bytes(report.pair_bytes));
  }
  for (const auto& culprit : report.culprits) {
    out += fmt::format("# FAIL {} {}: {}\n", culprit.kind, culprit.name, culprit.reason);
  }
  if (report.timeout) {
    const Timeout& t = *report.timeout;
    out += fmt::format(
        "# TIMEOUT in {} after {:.1f} s (seen by rank {} on {}){}\n", t.step, t.after_seconds, t.rank, t.host,
        t.silent_hosts.empty() ? "" : fmt::format("; no answer from {}", fmt::join(t.silent_hosts, ", ")));
  }
  if (!report.failure.empty()) out += "# FAIL " + report.failure + "\n";
  out += fmt::format("# result: {} in {:.1f} s\n", report.result(), report.seconds);
  return out;
}

}  // namespace tmpi::check
