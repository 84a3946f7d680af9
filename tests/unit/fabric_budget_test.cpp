// nccl-check on a degraded fabric, from the user's side of its verdict: the time budget
// (budget.h) and the judgement (verdict.h) driven by timings of both backends, and the
// launcher's localisation of a timeout from every rank's view (fabric_timeout.h). The MPI
// timings were recorded on the cluster in a box (3 pods x 2 ranks, node 2's eth0 shaped to
// 20 Mbit/s with tbf, nccl-check at its defaults); the NCCL ones are in the shape of an
// InfiniBand fabric (a 400 Gb/s NIC, one of them at 1/100), since no GPU pair runs here.
// Both go through the same functions: the driver takes one path for both backends.
#include <gtest/gtest.h>

#include "launcher/fabric_check.h"
#include "launcher/fabric_timeout.h"
#include "ncclcheck/budget.h"
#include "ncclcheck/verdict.h"

namespace tmpi::check {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

TEST(FabricBudget, DefaultsGiveTheSweepAQuarterAndEachPairRoundATwentieth) {
  Budgets budgets = budgets_for(Millis(60'000));
  EXPECT_DOUBLE_EQ(budgets.sweep, 15);
  EXPECT_DOUBLE_EQ(budgets.step, 3);
  EXPECT_EQ(budgets.reach, Millis(15'000));
  EXPECT_DOUBLE_EQ(budgets_for(Millis(5'000)).step, 1);  // 1 s at least
  EXPECT_EQ(check_deadline(Millis(60'000), 3), Millis(114'000));
  EXPECT_EQ(check_deadline(Millis(60'000), 8), Millis(186'000));
  EXPECT_EQ(probe_bytes(64 * kMiB), kMiB);
  EXPECT_EQ(probe_bytes(10), 4u);
}

TEST(FabricBudget, AHealthyFabricKeepsEveryIteration) {
  // MPI, recorded healthy: 1 MiB all-reduce 4.1 ms, 64 MiB pair round trip 0.09 s.
  Iterations wanted;
  Iterations sweep = choose_sweep_size(0.0041, 15, kMiB, 85 * kMiB, wanted).iterations;
  EXPECT_EQ(sweep.timed, 20);
  EXPECT_EQ(sweep.warmup, 5);
  PairChoice pair = choose_pair(64 * kMiB, kMiB, 0.09 / 64, 3, 15, wanted);
  EXPECT_EQ(pair.bytes, 64 * kMiB);
  EXPECT_EQ(pair.iterations.timed, 20);
  // Recorded on a loaded box: a healthy 64 MiB round trip of 1.3 s still gets 5 timed
  // iterations (and 1 warm-up), past the 3 s budget.
  PairChoice loaded = choose_pair(64 * kMiB, kMiB, 1.3 / 64, 3, 15, wanted);
  EXPECT_EQ(loaded.bytes, 64 * kMiB);
  EXPECT_EQ(loaded.iterations.timed, 5);
  EXPECT_EQ(loaded.iterations.warmup, 1);
  EXPECT_FALSE(skipped_size_is_slow(2.7, Millis(60'000)));
  EXPECT_TRUE(skipped_size_is_slow(28.2, Millis(60'000)));
}

// The sweep of the fabric: the sizes' times as nccl-check measured them at 100x.
TEST(FabricBudget, ASlowSweepSkipsTheSizesThatWouldNotFit) {
  Iterations wanted;
  double left = 15 - 0.033;  // after the 64 KiB reach probe
  std::uint64_t bytes_left = 85 * kMiB;
  struct Size {
    std::uint64_t bytes;
    double measured;
  };
  std::vector<Size> sizes = {{kMiB, 0.532}, {4 * kMiB, 1.837}, {16 * kMiB, 7.06}, {64 * kMiB, 0}};
  double last = 0.033;
  std::uint64_t last_bytes = 64 * 1024;
  std::vector<bool> ran;
  for (const auto& size : sizes) {
    SweepChoice choice = choose_sweep_size(predict_seconds(size.bytes, last_bytes, last), left, size.bytes,
                                           bytes_left, wanted);
    ran.push_back(choice.run);
    if (!choice.run) break;
    EXPECT_GE(choice.iterations.timed, 1);
    left -= size.measured * (choice.iterations.warmup + choice.iterations.timed);
    last = size.measured;
    last_bytes = size.bytes;
    bytes_left -= size.bytes;
  }
  EXPECT_EQ(ran, (std::vector<bool>{true, true, true, false}));  // 64 MiB: 28 s, past what is left
}

TEST(FabricBudget, ASlowPairIsMeasuredAtItsProbesSize) {
  Iterations wanted;
  // MPI at 100x: a 1 MiB round trip 0.42 s; 64 MiB would take 27 s of a 3 s budget.
  PairChoice mpi = choose_pair(64 * kMiB, kMiB, 0.42, 3, 15, wanted);
  EXPECT_EQ(mpi.bytes, kMiB);
  EXPECT_EQ(mpi.iterations.warmup + mpi.iterations.timed, 7);
  // NCCL at 1/100 of 50 GB/s: a 4 MiB probe 8.4 ms; 256 MiB would take 0.54 s: it fits,
  // 6 times (1 warm-up, 5 timed) within the sweep's 15 s.
  PairChoice nccl = choose_pair(256 * kMiB, 4 * kMiB, 0.0084, 3, 15, wanted);
  EXPECT_EQ(nccl.bytes, 256 * kMiB);
  EXPECT_EQ(nccl.iterations.warmup + nccl.iterations.timed, 6);
  // MPI at 1000x (recorded): a 1 MiB round trip 4.2 s, past the budget: the probe is the
  // sample, and no iteration follows it.
  PairChoice crawl = choose_pair(64 * kMiB, kMiB, 4.2, 3, 15, wanted);
  EXPECT_EQ(crawl.bytes, kMiB);
  EXPECT_EQ(crawl.iterations.timed, 0);
  EXPECT_EQ(crawl.iterations.warmup, 0);
}

Report three_hosts(Backend backend) {
  Report report;
  report.backend = backend;
  report.ranks = 6;
  for (int h = 0; h < 3; ++h)
    report.hosts.push_back({"node-" + std::to_string(h), {2 * h, 2 * h + 1}, {}, 2, false});
  return report;
}

// The links as each backend measured them with node 2 slowed, after the sweep skipped its
// largest size: node 2 alone is named, from its retest beside a good peer.
void expect_only_node_2(Report report, double fast, double slow) {
  report.skipped.push_back({64 * kMiB, 28.2, 5.48, true});
  report.links = {{{0, 1}, fast, 0, 64 * kMiB}, {{0, 2}, slow, 0, kMiB}, {{1, 2}, slow, 0, kMiB}};
  report.link_floor = floor_for({}, link_reference(report.links, 3));
  report.retests = {{{0, 2}, slow * 0.98, 0, kMiB}};
  judge(report, {});
  ASSERT_EQ(report.culprits.size(), 1u) << report.culprits.front().reason;
  EXPECT_EQ(report.culprits[0].kind, "host");
  EXPECT_EQ(report.culprits[0].name, "node-2");
  EXPECT_EQ(report.exit_code(), 69);
}

TEST(FabricVerdict, TheSlowHostIsNamedFromItsLinksWithEitherBackend) {
  expect_only_node_2(three_hosts(Backend::kMpi), 0.043, 0.00479);  // recorded, cluster in a box
  expect_only_node_2(three_hosts(Backend::kNccl), 46.0, 0.46);     // busbw of NCCL's pair all-reduce
}

TEST(FabricVerdict, ACutSweepThatNoLinkExplainsIsNotLocalised) {
  for (Backend backend : {Backend::kMpi, Backend::kNccl}) {
    Report report = three_hosts(backend);
    report.skipped.push_back({64 * kMiB, 28.2, 5.48, true});
    report.links = {{{0, 1}, 0.043, 0, 0}, {{0, 2}, 0.041, 0, 0}, {{1, 2}, 0.044, 0, 0}};
    report.link_floor = floor_for({}, link_reference(report.links, 3));
    Report trimmed = report;
    trimmed.skipped.front().slow = false;  // trimmed by the budget on a loaded, healthy fabric
    judge(trimmed, {});
    EXPECT_TRUE(trimmed.culprits.empty());
    judge(report, {});
    ASSERT_EQ(report.culprits.size(), 3u);
    for (const auto& culprit : report.culprits) {
      EXPECT_EQ(culprit.kind, "not localised");
      EXPECT_NE(culprit.reason.find("any of the 3 hosts"), std::string::npos);
    }
    EXPECT_EQ(report.exit_code(), 69);
  }
}

TEST(FabricVerdict, ATimeoutIsARetrysMatterOnlyWhereARankFellSilent) {
  Report report = three_hosts(Backend::kMpi);
  report.timeout = Timeout{"links round 1/3", 3, 0, "node-0", {}, {}, false};
  EXPECT_EQ(report.exit_code(), 69);
  EXPECT_EQ(report.result(), "not localised");
  report.timeout->silent_ranks = {4, 5};
  EXPECT_EQ(report.exit_code(), 75);
  report.timeout = Timeout{"MPI_Init", 10, 0, "node-0", {}, {}, true};
  EXPECT_EQ(report.exit_code(), 75);
}

}  // namespace
}  // namespace tmpi::check

namespace tmpi::launch {
namespace {

const std::vector<std::string> kPlacement = {"n0.job", "n0.job", "n1.job", "n1.job", "n2.job", "n2.job"};

nlohmann::json view(int rank, std::vector<int> silent) {
  return {{"rank", rank}, {"host", "?"}, {"step", "init"}, {"silent_ranks", silent}};
}

std::vector<std::string> hosts_named(const TimeoutVerdict& verdict) {
  std::vector<std::string> out;
  for (const auto& row : verdict.rows) out.push_back(row.host + " / " + row.check);
  return out;
}

TEST(FabricTimeout, ADroppingLinkIsNamedFromBothEndsViews) {
  // As recorded with nftables dropping every packet between n1 and n2.
  auto verdict = localise_timeout(
      {view(0, {}), view(1, {}), view(2, {4, 5}), view(3, {4, 5}), view(4, {2, 3}), view(5, {2, 3})},
      kPlacement, "mpi", "init did not finish");
  EXPECT_EQ(hosts_named(verdict), std::vector<std::string>{"n1 <-> n2 / mpi link"});
  EXPECT_EQ(verdict.exit, Exit::kUnavailable);
}

TEST(FabricTimeout, AStoppedHostIsNamedFromItsSilence) {
  auto verdict = localise_timeout({view(0, {4, 5}), view(1, {4, 5}), view(2, {4, 5}), view(3, {4, 5})},
                                  kPlacement, "nccl", "links round 2/3 did not finish");
  EXPECT_EQ(hosts_named(verdict), std::vector<std::string>{"n2 / nccl timeout"});
  EXPECT_EQ(verdict.exit, Exit::kTempFail);
}

TEST(FabricTimeout, AHostThatHearsNoneIsCutOff) {
  auto verdict = localise_timeout({view(0, {4}), view(2, {4}), view(4, {0, 2})}, kPlacement, "mpi", "x");
  EXPECT_EQ(hosts_named(verdict), std::vector<std::string>{"n2 / mpi host"});
  EXPECT_EQ(verdict.exit, Exit::kUnavailable);
}

TEST(FabricTimeout, EveryRankAnsweringIsNotLocalisedAndNamesEveryCandidate) {
  auto verdict = localise_timeout({view(0, {}), view(2, {}), view(4, {})}, kPlacement, "mpi", "x");
  EXPECT_EQ(hosts_named(verdict),
            (std::vector<std::string>{"n0 / mpi not localised", "n1 / mpi not localised",
                                      "n2 / mpi not localised"}));
  EXPECT_EQ(verdict.exit, Exit::kUnavailable);
}

TEST(FabricTimeout, ARankInABlockingCallIsAliveButItsMissesSayNothing) {
  nlohmann::json blocked = {{"rank", 0}, {"host", "n0"}, {"step", "init (MPI_Comm_dup)"}};
  auto verdict =
      localise_timeout({blocked, view(2, {0, 1, 4, 5}), view(4, {0, 1, 2, 3})}, kPlacement, "mpi", "x");
  EXPECT_EQ(hosts_named(verdict), std::vector<std::string>{"n1 <-> n2 / mpi link"});
}

// As recorded with node n2's ranks stopped in init's MPI_Comm_dup: mpirun's abort woke them
// (SIGCONT), and each said it gave up in that blocking call, but they had answered no ping.
TEST(FabricTimeout, AHostSeenSilentByAllThatSpokeOnlyFromABlockingCallIsTheSilentOne) {
  nlohmann::json woken = {{"rank", 4}, {"host", "n2"}, {"step", "init (MPI_Comm_dup)"}};
  auto verdict =
      localise_timeout({view(0, {4, 5}), view(2, {4, 5}), woken}, kPlacement, "mpi", "init did not finish");
  EXPECT_EQ(hosts_named(verdict), std::vector<std::string>{"n2 / mpi timeout"});
  EXPECT_EQ(verdict.exit, Exit::kTempFail);
  // One host that spoke heard it: no longer silent to all, and not localised.
  verdict = localise_timeout({view(0, {4, 5}), view(2, {}), woken}, kPlacement, "mpi", "init did not finish");
  EXPECT_EQ(verdict.rows.size(), 3u);
  EXPECT_EQ(verdict.rows.front().check, "mpi not localised");
}

TEST(FabricTimeout, TheLauncherReadsTheViewsFromNcclChecksOutput) {
  std::string output =
      "nccl-check timeout: {\"rank\":2,\"host\":\"n1\",\"step\":\"init\",\"silent_ranks\":[4,5]}\n"
      "nccl-check timeout: {\"rank\":4,\"host\":\"n2\",\"step\":\"init\",\"silent_ranks\":[2,3]}\n"
      "nccl-check timeout: {\"rank\":0,\"host\":\"n0\",\"step\":\"init\",\"silent_ranks\":[]}\n"
      "nccl-check report: {\"result\":\"not localised\",\"backend\":\"mpi\",\"timeout\":{\"step\":\"init\","
      "\"after_seconds\":15,\"rank\":0,\"host\":\"n0\",\"silent_ranks\":[]}}\n";
  FabricCheck check = read_fabric_check(output, 69, "launcher", kPlacement);
  ASSERT_EQ(check.rows.size(), 1u);
  EXPECT_EQ(check.rows[0].host, "n1 <-> n2");
  EXPECT_EQ(check.exit, Exit::kUnavailable);
}

}  // namespace
}  // namespace tmpi::launch
