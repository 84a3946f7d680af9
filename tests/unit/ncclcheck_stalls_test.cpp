// nccl-check's stalls (stalls.h): a link that stops while moving data, from timings recorded
// on the cluster in a box (the MPI backend, a port flapping 2 s down and 2 s up) and shaped
// like the NCCL backend's (sub-millisecond iterations on NVLink and InfiniBand).
#include <gtest/gtest.h>

#include "ncclcheck/budget.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"
#include "ncclcheck/stalls.h"
#include "ncclcheck/verdict.h"

namespace tmpi::check {
namespace {

const std::vector<std::string> kStallHosts = {"node-0", "node-1", "node-2"};

TEST(Stalls, ANoisyHealthyTestHasNoStallAndOneOutageHasOne) {
  // MPI backend, 64 MiB round trips on a shared 2-core host: 60 ms, one delayed to 150 ms.
  auto noisy = summarize_iterations({0.061, 0.060, 0.150, 0.059, 0.062});
  EXPECT_DOUBLE_EQ(noisy.median, 0.061);
  EXPECT_DOUBLE_EQ(noisy.stall, 0.0);
  EXPECT_FALSE(is_stall(noisy.stall));
  // The same link through a 2 s outage: one round trip waits out TCP's retransmissions.
  auto flapped = summarize_iterations({0.061, 0.060, 3.2, 0.059, 0.062});
  EXPECT_NEAR(flapped.stall, 3.2 - 0.061, 1e-9);
  EXPECT_TRUE(is_stall(flapped.stall));
  EXPECT_NEAR(flapped.mean, (0.061 + 0.060 + 3.2 + 0.059 + 0.062) / 5, 1e-9);
  // NCCL backend: 0.4 ms all-reduces between two GPUs; a 3x jitter is no stall, a proxy
  // that waited 2.5 s for its peer is.
  EXPECT_DOUBLE_EQ(summarize_iterations({0.0004, 0.0012, 0.0004, 0.0005}).stall, 0.0);
  EXPECT_TRUE(is_stall(summarize_iterations({0.0004, 0.0004, 2.5, 0.0004, 0.0005}).stall));
  // Slow throughout is slow, not stopped: the median says so, and bandwidth judges it.
  EXPECT_DOUBLE_EQ(summarize_iterations({2.0, 2.1, 1.9}).stall, 0.0);
  EXPECT_DOUBLE_EQ(summarize_iterations({}).stall, 0.0);
}

TEST(Stalls, TheFlappingHostIsNamedFromItsStopAndItsRetest) {
  // Recorded in the box: node 2's port flapping. The first pass saw 0 <-> 2 stop for 3.1 s;
  // the retest of 1 <-> 2 fell in an outage (its one sample, 0.001 GB/s); 0 <-> 1 ran clean.
  std::vector<LinkSample> links = {{{1, 2}, 1.874, 0, 0, 0.0},
                                   {{0, 2}, 1.915, 0, 0, 3.1},
                                   {{0, 1}, 1.980, 0, 0, 0.0},
                                   {{0, 1}, 1.970, 0, 0, 0.0},
                                   {{1, 2}, 0.001, 0, 0, 0.0}};
  auto culprits = judge_stalls(links, 0.99, {}, kStallHosts);
  ASSERT_EQ(culprits.size(), 1u);
  EXPECT_EQ(culprits[0].kind, "host");
  EXPECT_EQ(culprits[0].name, "node-2");
  EXPECT_NE(culprits[0].reason.find("node-0 <-> node-2 stopped 3.1 s"), std::string::npos);
  EXPECT_NE(culprits[0].reason.find("node-1 <-> node-2 at 0.001 GB/s"), std::string::npos);
}

TEST(Stalls, OneStoppedLinkAloneIsNotLocalisedBetweenItsEnds) {
  std::vector<LinkSample> links = {
      {{1, 2}, 1.9, 0, 0, 3.2}, {{0, 2}, 1.9, 0, 0, 0.0}, {{0, 1}, 1.9, 0, 0, 0.0}};
  auto culprits = judge_stalls(links, 0.95, {}, kStallHosts);
  ASSERT_EQ(culprits.size(), 2u);
  for (const auto& culprit : culprits) EXPECT_EQ(culprit.kind, "not localised");
  EXPECT_EQ(culprits[0].name, "node-1");
  EXPECT_EQ(culprits[1].name, "node-2");
  EXPECT_NE(culprits[0].reason.find("any of node-1, node-2 could be at fault"), std::string::npos);
}

TEST(Stalls, ASweepThatStoppedWithCleanLinksNamesEveryHostAsACandidate) {
  std::vector<LinkSample> links = {
      {{1, 2}, 1.9, 0, 0, 0.0}, {{0, 2}, 1.9, 0, 0, 0.0}, {{0, 1}, 1.9, 0, 0, 0.0}};
  auto culprits = judge_stalls(links, 0.95, {3.1, 16 << 20}, kStallHosts);
  ASSERT_EQ(culprits.size(), 3u);
  for (const auto& culprit : culprits) EXPECT_EQ(culprit.kind, "not localised");
  EXPECT_NE(culprits[0].reason.find("all-reduce of 16 MiB stopped for 3.1 s"), std::string::npos);
  // Nothing stopped anywhere: nothing to say, even with a slow link (bandwidth's finding).
  links[0].gbps = 0.01;
  EXPECT_TRUE(judge_stalls(links, 0.95, {0.2, 16 << 20}, kStallHosts).empty());
}

TEST(Stalls, TheHostsOfAStoppedLinkAreRetestedBesideACleanHost) {
  std::vector<LinkSample> links = {
      {{1, 2}, 1.9, 0, 0, 3.2}, {{0, 2}, 1.9, 0, 0, 0.0}, {{0, 1}, 1.9, 0, 0, 0.0}};
  auto stopped = hosts_of_stalled_links(links);
  EXPECT_EQ(stopped, (std::set<int>{1, 2}));
  auto rounds = retest_rounds(links, 0.95, 3, stopped);
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[0], (std::vector<Pair>{{0, 1}}));
  EXPECT_EQ(rounds[1], (std::vector<Pair>{{0, 2}}));
  EXPECT_TRUE(retest_rounds(links, 0.95, 3).empty());  // by bandwidth alone, no suspect
}

TEST(Stalls, ARetestWhoseProbeFellInAnOutageIsPlannedFromTheFirstPass) {
  // Recorded in the box: the retest of node 1 <-> node 2 probed 1 MiB in 0.2135 s (one
  // round trip waited out a retransmission), where the first pass had measured 1.936 GB/s.
  Budgets budgets = budgets_for(Millis(60'000));
  std::uint64_t full = 64 << 20, probe = 1 << 20;
  double at_1_gbps = 2.0 * static_cast<double>(probe) / 1e9;  // MPI: two transfers a round trip
  RetestOfAStop retest{full, probe, 0.2135, at_1_gbps, {1, 2}};
  std::vector<LinkSample> first_pass = {{{1, 2}, 1.936, 0, full, 3.1}, {{0, 1}, 1.9, 0, full, 0.0}};
  PairChoice planned = choose_retest_of_a_stop(retest, first_pass, 0.97, budgets, Iterations{});
  EXPECT_EQ(planned.bytes, full);
  // 64 MiB round trips at 1.936 GB/s take 69 ms: two rounds' budgets (6 s) hold 86 of them.
  double round_trip = 2.0 * static_cast<double>(full) / 1.936e9;
  EXPECT_NEAR((planned.iterations.warmup + planned.iterations.timed) * round_trip, 6.0, 0.1);
  // Planned from the probe alone (no first pass, or a first pass below the floor), it ran
  // probe-sized tests: what missed the flap.
  PairChoice alone = choose_retest_of_a_stop(retest, {}, 0.97, budgets, Iterations{});
  EXPECT_EQ(alone.bytes, probe);
  first_pass[0].gbps = 0.5;
  EXPECT_EQ(choose_retest_of_a_stop(retest, first_pass, 0.97, budgets, Iterations{}).bytes, probe);
  // A probe faster than the first pass is kept.
  retest.probe_seconds = 0.0005;
  first_pass[0].gbps = 1.936;
  PairChoice fast = choose_retest_of_a_stop(retest, first_pass, 0.97, budgets, Iterations{});
  EXPECT_NEAR((fast.iterations.warmup + fast.iterations.timed) * 0.0005 * 64, 6.0, 0.1);
}

Report stalled_report() {
  Report report;
  report.ranks = 6;
  for (int h = 0; h < 3; ++h)
    report.hosts.push_back({kStallHosts[static_cast<std::size_t>(h)], {2 * h, 2 * h + 1}});
  report.allreduce.push_back({16 << 20, 0.05, 0.3, 0.5, 0, 5, 3.1});
  report.links = {{{1, 2}, 1.874, 0, 0, 0.0}, {{0, 2}, 1.915, 0, 0, 3.1}, {{0, 1}, 1.980, 0, 0, 0.0}};
  report.retests = {{{0, 1}, 1.970, 0, 0, 0.0}, {{1, 2}, 0.001, 0, 0, 0.0}};
  report.link_floor = 0.99;
  return report;
}

TEST(Stalls, TheVerdictNamesTheFlapOnlyWhereBandwidthFoundNothing) {
  Report report = stalled_report();
  report.retests[1].gbps = 1.9;   // the retest beside node 1 ran clean: bandwidth finds nothing
  report.retests[1].stall = 2.2;  // but it stopped
  judge(report, Threshold{});
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].kind, "host");
  EXPECT_EQ(report.culprits[0].name, "node-2");
  EXPECT_EQ(report.exit_code(), 69);
  std::string table = render_table(report);
  EXPECT_NE(table.find("# link node-0 <-> node-2: 1.915 GB/s  #wrong 0  STOPPED 3.1 s"), std::string::npos);
  EXPECT_NE(table.find("# all-reduce of 16 MiB: one iteration stopped for 3.1 s"), std::string::npos);
  auto json = to_json(report);
  EXPECT_DOUBLE_EQ(json["links"][1]["stall_seconds"].get<double>(), 3.1);
  EXPECT_DOUBLE_EQ(json["allreduce"][0]["stall_seconds"].get<double>(), 3.1);

  // A slow host that bandwidth names explains its own stalls: no second finding.
  Report slow = stalled_report();
  slow.links[0].gbps = 0.01;
  slow.links[1].gbps = 0.01;
  slow.retests[1].gbps = 0.01;
  judge(slow, Threshold{});
  ASSERT_EQ(slow.culprits.size(), 1u);
  EXPECT_EQ(slow.culprits[0].kind, "host");
  EXPECT_EQ(slow.culprits[0].reason.find("stopped"), std::string::npos);
}

}  // namespace
}  // namespace tmpi::check
