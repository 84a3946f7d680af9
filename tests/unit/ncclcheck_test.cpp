// nccl-check's arithmetic, schedule, thresholds and data check, without MPI (its report:
// ncclcheck_report_test.cpp).
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "ncclcheck/cpus.h"
#include "ncclcheck/data_check.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"
#include "ncclcheck/verdict.h"

namespace tmpi::check {
namespace {

TEST(Bandwidth, FollowsNcclTestsDefinitions) {
  // 1 GB in 0.1 s is 10 GB/s algbw; on 8 ranks busbw = 10 * 2 * 7 / 8 = 17.5.
  EXPECT_DOUBLE_EQ(algbw_gbps(1'000'000'000, 0.1), 10.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw(10.0, 8), 17.5);
  EXPECT_DOUBLE_EQ(allreduce_busbw(10.0, 2), 10.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw(10.0, 1), 0.0);  // one rank moves nothing
  EXPECT_DOUBLE_EQ(algbw_gbps(100, 0.0), 0.0);
}

TEST(SizeLadder, StepsByFactorAndEndsAtMax) {
  auto sizes = size_ladder(1 << 20, 1 << 30, 4);
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(*sizes, (std::vector<std::uint64_t>{1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30}));
  EXPECT_EQ(*size_ladder(1000, 5000, 2), (std::vector<std::uint64_t>{1000, 2000, 4000, 5000}));
  EXPECT_EQ(*size_ladder(4096, 4096, 2), (std::vector<std::uint64_t>{4096}));
}

TEST(SizeLadder, BadFlagsAreNamed) {
  auto inverted = size_ladder(1 << 20, 1 << 10, 2);
  ASSERT_FALSE(inverted.ok());
  EXPECT_EQ(inverted.error().exit, Exit::kUsage);
  EXPECT_NE(inverted.error().message.find("--max-bytes"), std::string::npos);
  EXPECT_NE(size_ladder(1, 8, 2).error().message.find("--min-bytes"), std::string::npos);
  EXPECT_NE(size_ladder(8, 64, 1).error().message.find("--step-factor"), std::string::npos);
}

// Each pair exactly once, no host twice in a round, and the fewest rounds.
TEST(PairRounds, EveryPairOnceInTheFewestRounds) {
  for (int hosts = 0; hosts <= 17; ++hosts) {
    auto rounds = pair_rounds(hosts);
    std::set<Pair> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (auto [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second)
            << hosts << " hosts: a host twice in a round";
        EXPECT_TRUE(seen.insert({a, b}).second) << hosts << " hosts: pair " << a << "-" << b << " twice";
      }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(hosts * (hosts - 1) / 2)) << hosts << " hosts";
    std::size_t fewest = hosts < 2 ? 0 : static_cast<std::size_t>(hosts % 2 == 0 ? hosts - 1 : hosts);
    EXPECT_EQ(rounds.size(), fewest) << hosts << " hosts";
  }
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

std::vector<std::string> names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("node-" + std::to_string(i));
  return out;
}

// Three hosts, host 2 slow on every link: a plain median of links would be slow itself.
TEST(Links, OneSlowHostAmongThreeIsNamedAfterItsRetest) {
  std::vector<LinkSample> links = {{{0, 1}, 10.0, 0}, {{0, 2}, 0.5, 0}, {{1, 2}, 0.6, 0}};
  double reference = link_reference(links, 3);
  EXPECT_DOUBLE_EQ(reference, 10.0);  // best links: 10, 10, 0.6
  double floor = floor_for({0, 0.5}, reference);
  EXPECT_DOUBLE_EQ(floor, 5.0);
  auto rounds = retest_rounds(links, floor, 3);
  ASSERT_EQ(rounds.size(), 1U);  // one suspect (host 2: no fast link), beside the first good host
  EXPECT_EQ(rounds[0], (std::vector<Pair>{{0, 2}}));
  auto culprits = judge_links(links, {{{0, 2}, 0.4, 0}}, floor, names(3));
  ASSERT_EQ(culprits.size(), 1U);  // its two slow links are its own fault, not named again
  EXPECT_EQ(culprits[0].kind, "host");
  EXPECT_EQ(culprits[0].name, "node-2");
  // A retest that is fast clears the host: its first pass was noise, and the links are named.
  auto cleared = judge_links(links, {{{0, 2}, 9.0, 0}}, floor, names(3));
  ASSERT_EQ(cleared.size(), 2U);
  EXPECT_EQ(cleared[0].kind, "link");
}

TEST(Links, RetestAgainstAGoodPeerSeparatesHostsFromLinks) {
  // Four hosts: host 3 is slow everywhere; the link 0-1 alone is slow.
  std::vector<LinkSample> links = {{{0, 1}, 1.0, 0}, {{2, 3}, 1.0, 0}, {{0, 2}, 10, 0},
                                   {{1, 3}, 1.0, 0}, {{0, 3}, 1.0, 0}, {{1, 2}, 10, 0}};
  double floor = floor_for({0, 0.5}, link_reference(links, 4));
  EXPECT_DOUBLE_EQ(floor, 5.0);
  auto rounds = retest_rounds(links, floor, 4);
  // One suspect: host 3, whose every link is slow; 0 and 1 are fast with host 2.
  ASSERT_EQ(rounds.size(), 1U);
  EXPECT_EQ(rounds[0], (std::vector<Pair>{{0, 3}}));
  std::vector<LinkSample> retests = {{{0, 3}, 1.1, 0}};
  auto culprits = judge_links(links, retests, floor, names(4));
  ASSERT_EQ(culprits.size(), 2U);
  EXPECT_EQ(culprits[0].kind, "host");
  EXPECT_EQ(culprits[0].name, "node-3");
  EXPECT_NE(culprits[0].reason.find("beside the good peer node-0"), std::string::npos) << culprits[0].reason;
  EXPECT_EQ(culprits[1].kind, "link");
  EXPECT_EQ(culprits[1].name, "node-0 <-> node-1");
  EXPECT_NE(culprits[1].reason.find("both ends are fast with other hosts"), std::string::npos);
}

TEST(Links, AllFastNamesNothingAndNeedsNoRetest) {
  std::vector<LinkSample> links = {{{0, 1}, 10, 0}, {{0, 2}, 9, 0}, {{1, 2}, 11, 0}};
  double floor = floor_for({0, 0.5}, link_reference(links, 3));
  EXPECT_TRUE(retest_rounds(links, floor, 3).empty());
  EXPECT_TRUE(judge_links(links, {}, floor, names(3)).empty());
}

TEST(Links, WrongDataOrAnAbsoluteFloorFails) {
  std::vector<LinkSample> links = {{{0, 1}, 10, 3}};
  auto culprits = judge_links(links, {}, floor_for({0, 0.5}, link_reference(links, 2)), names(2));
  ASSERT_EQ(culprits.size(), 1U);
  EXPECT_NE(culprits[0].reason.find("3 wrong elements"), std::string::npos);
  EXPECT_NE(culprits[0].reason.find("no host is fast enough"), std::string::npos) << culprits[0].reason;
  links[0].wrong = 0;
  EXPECT_EQ(judge_links(links, {}, floor_for({20, 0.5}, 10), names(2)).size(), 1U);  // below --min-busbw 20
}

TEST(SecondLook, EverySlowPairWithRightDataOnceInDisjointRounds) {
  // 4 GPUs: 0-1 and 2-3 slow in one round (a busy scheduler), 0-2 slow, 1-3 with wrong data.
  std::vector<LinkSample> links = {{{0, 1}, 2, 0}, {{2, 3}, 2, 0}, {{0, 2}, 1, 0},
                                   {{1, 3}, 2, 5}, {{0, 3}, 5, 0}, {{1, 2}, 5, 0}};
  auto rounds = second_look_rounds(links, 3.0);
  std::multiset<Pair> seen;
  for (const auto& round : rounds) {
    std::set<int> ends;
    for (const auto& pair : round) {
      EXPECT_TRUE(ends.insert(pair.first).second && ends.insert(pair.second).second)
          << "a GPU twice in one round";
      seen.insert(pair);
    }
  }
  EXPECT_EQ(seen, (std::multiset<Pair>{{0, 1}, {2, 3}, {0, 2}}));  // wrong data is not noise: no second look
  EXPECT_EQ(rounds.size(), 2U);
  EXPECT_TRUE(second_look_rounds(links, 0.5).empty());
  auto alone = second_look_rounds(links, 3.0, true);  // a host's GPU pairs: one a round
  ASSERT_EQ(alone.size(), 3U);
  for (const auto& round : alone) EXPECT_EQ(round.size(), 1U);
}

TEST(SecondLook, ABetterSecondSampleClearsNoiseButNotWrongData) {
  std::vector<LinkSample> links = {{{0, 1}, 2, 0}, {{2, 3}, 2, 0}, {{0, 2}, 5, 0},
                                   {{1, 3}, 5, 0}, {{0, 3}, 5, 0}, {{1, 2}, 5, 0}};
  std::vector<std::string> gpus = {"g0", "g1", "g2", "g3"};
  EXPECT_EQ(judge_gpus(links, 3.0, gpus).size(), 2U);  // on one sample, two links are blamed
  merge_second_look(links, {{{0, 1}, 4.8, 0}, {{2, 3}, 2.1, 3}});
  EXPECT_DOUBLE_EQ(links[0].gbps, 4.8);
  EXPECT_DOUBLE_EQ(links[1].gbps, 2.1);
  EXPECT_EQ(links[1].wrong, 3);
  auto culprits = judge_gpus(links, 3.0, gpus);
  ASSERT_EQ(culprits.size(), 1U);  // 0-1 was noise; 2-3 is slow twice, and moved wrong data
  EXPECT_EQ(culprits[0].name, "g2 <-> g3");
}

TEST(Gpus, ASlowGpuAmongFourIsNamedAndTwoCannotBeToldApart) {
  std::vector<std::string> gpus = {"n GPU 0", "n GPU 1", "n GPU 2", "n GPU 3"};
  // GPU 2 is slow with everyone; the link 0-3 alone is slow too.
  std::vector<LinkSample> links = {{{0, 1}, 300, 0}, {{2, 3}, 20, 0}, {{0, 2}, 25, 0},
                                   {{1, 3}, 310, 0}, {{0, 3}, 30, 0}, {{1, 2}, 22, 0}};
  double floor = floor_for({0, 0.5}, link_reference(links, 4));
  EXPECT_DOUBLE_EQ(floor, 152.5);  // half the median of the best links: 25, 300, 310, 310
  auto culprits = judge_gpus(links, floor, gpus);
  ASSERT_EQ(culprits.size(), 2U);
  EXPECT_EQ(culprits[0].kind, "gpu");
  EXPECT_EQ(culprits[0].name, "n GPU 2");
  EXPECT_NE(culprits[0].reason.find("20 GB/s with n GPU 3"), std::string::npos) << culprits[0].reason;
  EXPECT_EQ(culprits[1].kind, "gpu link");
  EXPECT_EQ(culprits[1].name, "n GPU 0 <-> n GPU 3");
  // Two GPUs and their one slow link: the link is named, neither GPU.
  auto two = judge_gpus({{{0, 1}, 20, 0}}, 150, {"n GPU 0", "n GPU 1"});
  ASSERT_EQ(two.size(), 1U);
  EXPECT_EQ(two[0].kind, "gpu link");
  EXPECT_TRUE(judge_gpus(links, 10, gpus).empty());
}

TEST(Nodes, BelowTheFractionOfTheMedianHost) {
  std::vector<NodeSample> nodes = {{0, 100, 0}, {1, 95, 0}, {2, 30, 0}, {3, 101, 0}};
  auto culprits = judge_nodes(nodes, {0, 0.5}, names(4));
  ASSERT_EQ(culprits.size(), 1U);
  EXPECT_EQ(culprits[0].kind, "node");
  EXPECT_EQ(culprits[0].name, "node-2");
  EXPECT_TRUE(judge_nodes(nodes, {0, 0.25}, names(4)).empty());
}

TEST(DataCheck, CountsEveryWrongElementAndThePoison) {
  const int ranks = 5;
  const std::size_t count = 1000;
  std::vector<float> sum(count, 0.0F), one(count);
  for (int r = 0; r < ranks; ++r) {
    fill_pattern(one.data(), count, r);
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_NE(one[i], 0.0F);
      sum[i] += one[i];
    }
  }
  EXPECT_EQ(count_wrong_sum(sum.data(), count, ranks), 0);
  EXPECT_EQ(count_wrong_sum(sum.data(), count, ranks + 1),
            static_cast<std::int64_t>(count));  // a rank missing
  sum[7] += 1;
  sum[900] = 0;
  EXPECT_EQ(count_wrong_sum(sum.data(), count, ranks), 2);
  poison(sum.data(), count);
  EXPECT_TRUE(std::isnan(sum[0]));
  EXPECT_EQ(count_wrong_sum(sum.data(), count, ranks), static_cast<std::int64_t>(count));
  fill_pattern(one.data(), count, 3);
  EXPECT_EQ(count_wrong_copy(one.data(), count, 3), 0);
  EXPECT_EQ(count_wrong_copy(one.data(), count, 4), static_cast<std::int64_t>(count));
}

}  // namespace
}  // namespace tmpi::check
