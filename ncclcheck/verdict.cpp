// See verdict.h.
#include "ncclcheck/verdict.h"

#include <algorithm>

#include <fmt/format.h>

#include "ncclcheck/stalls.h"

namespace tmpi::check {

namespace {

// Each host's GPUs judged among themselves, against the one floor for all of them.
void judge_gpus_of_every_host(Report& report) {
  for (std::size_t h = 0; h < report.hosts.size(); ++h) {
    auto own = gpu_links_of_host(report, static_cast<int>(h));
    if (own.empty()) continue;
    std::vector<std::string> gpu_names;
    for (std::size_t l = 0; l < report.hosts[h].ranks.size(); ++l)
      gpu_names.push_back(report.gpu_name(static_cast<int>(h), static_cast<int>(l)));
    auto culprits = report.hosts[h].shares_cpus ? judge_gpu_data(own, gpu_names)
                                                : judge_gpus(own, report.gpu_floor, gpu_names);
    report.culprits.insert(report.culprits.end(), culprits.begin(), culprits.end());
  }
}

// A sweep that its budget cut short, which no test of a host or a link explains: the
// fabric is slow somewhere that none of them measured alone. Every host could be at fault,
// and each is named as a candidate, never one of them picked.
void judge_unexplained_sweep(Report& report) {
  auto slow = std::find_if(report.skipped.begin(), report.skipped.end(),
                           [](const SkippedSize& size) { return size.slow; });
  if (slow == report.skipped.end()) return;
  for (const auto& culprit : report.culprits) {
    if (culprit.kind != "world" && culprit.kind != "data") return;
  }
  const auto& first = *slow;
  std::string why = fmt::format(
      "the all-host all-reduce of {} would take {:.3g} s an iteration, yet every test of one host or one "
      "link passed: not localised, any of the {} hosts could be at fault",
      human_bytes(first.bytes), first.predicted, report.hosts.size());
  for (const auto& host : report.hosts) report.culprits.push_back({"not localised", host.name, why});
}

// Links that stopped while moving data (stalls.h), where no finding of bandwidth, data or
// a host's own all-reduce came first: a slow or broken link explains its own stalls.
void judge_stalls_unless_explained(Report& report, const std::vector<std::string>& names) {
  if (!report.culprits.empty()) return;
  std::vector<LinkSample> links = report.links;
  links.insert(links.end(), report.retests.begin(), report.retests.end());
  report.culprits = judge_stalls(links, report.link_floor, longest_sweep_stall(report.allreduce), names);
}

}  // namespace

std::vector<LinkSample> gpu_links_of_host(const Report& report, int host) {
  std::vector<LinkSample> own;
  for (const auto& gpu : report.gpu_links) {
    if (gpu.host == host) own.push_back(gpu.link);
  }
  return own;
}

double gpu_floor(const Report& report, const Threshold& threshold) {
  std::vector<LinkSample> global;
  int total = 0;
  std::vector<int> offset;  // first global GPU index of each host
  for (const auto& host : report.hosts) {
    offset.push_back(total);
    total += static_cast<int>(host.ranks.size());
  }
  for (const auto& gpu : report.gpu_links) {
    auto host = static_cast<std::size_t>(gpu.host);
    if (host >= report.hosts.size() || report.hosts[host].shares_cpus) continue;
    int base = offset[host];
    global.push_back(
        {{base + gpu.link.hosts.first, base + gpu.link.hosts.second}, gpu.link.gbps, gpu.link.wrong});
  }
  return floor_for(threshold, link_reference(global, total));
}

void judge(Report& report, const Threshold& threshold) {
  std::vector<std::string> names;
  for (const auto& host : report.hosts) names.push_back(host.name);
  for (const auto& size : report.allreduce) {
    if (size.wrong > 0) {
      report.culprits.push_back({"data", "world",
                                 fmt::format("all-reduce of {}: {} wrong elements over {} ranks",
                                             human_bytes(size.bytes), size.wrong, report.ranks)});
    }
  }
  if (!report.allreduce.empty() && report.ranks > 1 && report.allreduce.back().busbw < threshold.min_gbps) {
    const auto& largest = report.allreduce.back();
    report.culprits.push_back({"world", "world",
                               fmt::format("all-reduce of {}: busbw {:.3g} GB/s, below --min-busbw {:.3g}",
                                           human_bytes(largest.bytes), largest.busbw, threshold.min_gbps)});
  }
  std::vector<NodeSample> judged;  // a host whose ranks share CPUs measured its scheduler: its data only
  for (const auto& node : report.nodes) {
    if (!report.hosts[static_cast<std::size_t>(node.host)].shares_cpus) {
      judged.push_back(node);
    } else if (node.wrong > 0) {
      report.culprits.push_back({"node", names[static_cast<std::size_t>(node.host)],
                                 fmt::format("intra-node all-reduce: {} wrong elements", node.wrong)});
    }
  }
  auto nodes = judge_nodes(judged, threshold, names);
  report.gpu_floor = gpu_floor(report, threshold);
  judge_gpus_of_every_host(report);
  auto links = judge_links(report.links, report.retests, report.link_floor, names);
  report.culprits.insert(report.culprits.end(), nodes.begin(), nodes.end());
  report.culprits.insert(report.culprits.end(), links.begin(), links.end());
  judge_unexplained_sweep(report);
  judge_stalls_unless_explained(report, names);
}

}  // namespace tmpi::check
