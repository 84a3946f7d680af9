// The verdict of nccl-check: the samples of a filled report turned into culprits. Every rank
// holds the same all-reduced samples, so every rank reaches the same verdict without another
// message (driver.h). It is free of MPI, like metrics.h, whose thresholds it applies, so
// that unit tests hand it a report built by hand.
//
// What is judged, in the order the culprits are listed:
// - data: any size of the world all-reduce with a wrong element;
// - world: the largest all-reduce below --min-busbw (only with more than one rank);
// - node: wrong data in the own all-reduce of a host whose ranks share CPUs (its bandwidth is
//   the scheduler's, not judged);
// - gpu: each host's GPU pairs against one floor for every GPU (judge_gpus; data only where
//   the ranks share CPUs);
// - node: a host's own all-reduce below the floor (judge_nodes);
// - host and link: the links between hosts, after their retests (judge_links);
// - not localised: a sweep that its budget cut short, which no host or link explains;
// - host or not localised: links, or the sweep, that stopped for a second or more while
//   moving data (a flapping port: stalls.h), where nothing above was found.
#pragma once

#include <vector>

#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"

namespace tmpi::check {

// The GPU links of one host (report.gpu_links), indexed by local rank.
std::vector<LinkSample> gpu_links_of_host(const Report& report, int host);

// One floor for every GPU link: the median over all GPUs of each one's best link, from the
// hosts whose bandwidth is judged (not those whose ranks share CPUs).
double gpu_floor(const Report& report, const Threshold& threshold);

// Sets report.gpu_floor, and appends the culprits that its samples show.
void judge(Report& report, const Threshold& threshold);

}  // namespace tmpi::check
