// The hosts of the plan that never say a word, driven with the engine's time given: once the
// job's first rank report is taken, every host that runs ranks by the plan must report within
// lost_after, or it is named lost (a node down from the start sends no FIN, no report, no
// beat, and was never expected before). Before the first report nothing is judged (MPI's
// own start-up runs then); a host heard from once is judged by its beats, as before; our
// own overload holds the verdict back one lost_after at most; the end of the job, none.
#include <gtest/gtest.h>

#include "common/proof.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

using namespace std::chrono_literals;

const std::string kUnheardKey = derive_rendezvous_key("unheard test key");
const std::vector<std::string> kUnheardHosts = {"u-node-0-0.u", "u-node-0-1.u", "u-node-0-2.u"};
const Clock::time_point kUnheardT0 = Clock::time_point{} + 1000h;

struct Plan {
  // Three hosts; `ranked` of them run ranks by the plan (two slots each).
  explicit Plan(std::vector<std::string> ranked)
      : coordinator(config(std::move(ranked)), callbacks(), kUnheardT0) {}
  static CoordinatorConfig config(std::vector<std::string> ranked) {
    CoordinatorConfig c;
    c.hosts = kUnheardHosts;
    for (const auto& host : kUnheardHosts) c.slots[host] = 2;
    c.key = kUnheardKey;
    c.lost_after = 15s;
    c.ranked_hosts = std::move(ranked);
    return c;
  }
  CoordinatorCallbacks callbacks() {
    CoordinatorCallbacks c;
    c.host_lost = [this](const std::string& host, const std::string& why) {
      lost.push_back(host + ": " + why);
    };
    c.rank_event = [this](const RankEvent& event) { events.push_back(event.rank); };
    return c;
  }
  // Host i's address is 10.0.0.(i+1); its short name is what the agents send, as gethostname().
  static std::string address(std::size_t host) { return "10.0.0." + std::to_string(host + 1); }
  Reply report(int rank, std::size_t host, RankEventKind event, std::chrono::seconds at) {
    std::string short_name = kUnheardHosts[host].substr(0, kUnheardHosts[host].find('.'));
    Call call{"POST",
              kRankPath,
              signed_body(kUnheardKey, RankReport{rank, short_name, event, 0, 0, 0, "", random_nonce(), ""}),
              address(host),
              {address(host)}};
    return coordinator.handle(call, kUnheardT0 + at);
  }
  Reply beat(int rank, std::size_t host, long long seq, std::chrono::seconds at) {
    std::string short_name = kUnheardHosts[host].substr(0, kUnheardHosts[host].find('.'));
    Call call{
        "POST", kRankBeatPath, signed_body(kUnheardKey, RankBeat{rank, short_name, seq}), address(host), {}};
    return coordinator.handle(call, kUnheardT0 + at);
  }
  void tick(std::chrono::seconds at) { coordinator.tick(kUnheardT0 + at); }
  std::vector<std::string> lost;
  std::vector<int> events;  // the ranks whose reports reached the launcher, in order
  Coordinator coordinator;
};

TEST(UnheardHosts, AHostOfThePlanThatNeverReportsIsLostLostAfterTheJobsFirstReport) {
  Plan plan(kUnheardHosts);
  // MPI's start-up takes 40 s (a big job, a slow pull): nothing is judged before a rank runs.
  plan.tick(40s);
  EXPECT_TRUE(plan.lost.empty()) << "a host named lost before any rank of the job had reported";
  // Hosts 0 and 1 report their first ranks at 40 s and 41 s; host 2, dead since before its
  // ranks could start, never does.
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 40s).status, 200);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kStart, 41s).status, 200);
  for (long long seq = 1; seq <= 2; ++seq) {
    auto at = 40s + std::chrono::seconds(seq * 5);
    ASSERT_EQ(plan.beat(0, 0, seq, at).status, 200);
    ASSERT_EQ(plan.beat(2, 1, seq, at).status, 200);
    plan.tick(at);
  }
  plan.tick(54s);
  EXPECT_TRUE(plan.lost.empty()) << "14 s after the first report: not yet";
  plan.tick(55s);
  ASSERT_EQ(plan.lost.size(), 1U);
  EXPECT_EQ(
      plan.lost[0],
      "u-node-0-2.u: none of its ranks has reported, 15 s after the job's first rank did: down since the "
      "start, or its rank agents cannot reach the launcher");
  EXPECT_EQ(plan.coordinator.hosts().at("u-node-0-2.u").state, HostState::kLost);
  plan.tick(60s);
  EXPECT_EQ(plan.lost.size(), 1U) << "named once; the others beat 10 s ago";
}

TEST(UnheardHosts, OnlyTheHostsThatRunRanksAreExpected) {
  // np = 4 over three hosts of two slots: host 2 runs nothing, and is never expected to speak.
  Plan plan({kUnheardHosts[0], kUnheardHosts[1]});
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kStart, 0s).status, 200);
  // A host whose ranks all ended early (their exits reported) was heard: it is not lost either.
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kExit, 1s).status, 200);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kExit, 1s).status, 200);
  plan.tick(100s);
  EXPECT_TRUE(plan.lost.empty()) << plan.lost.front();
}

TEST(UnheardHosts, WithNoPlanOnlyTheHostsHeardFromAreFollowed) {
  // A user's mapping (--map-by node, a rankfile): the launcher cannot say which hosts run ranks.
  Plan plan({});
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.beat(0, 0, 1, 10s).status, 200);
  plan.tick(20s);
  EXPECT_TRUE(plan.lost.empty()) << plan.lost.front();
}

TEST(UnheardHosts, OurOwnOverloadHoldsTheVerdictBackOneLostAfterAtMost) {
  Plan plan(kUnheardHosts);
  plan.coordinator.server_counts(ServerCounts{}, kUnheardT0);
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kStart, 0s).status, 200);
  // The server turned connections away at its cap 3 s in: host 2's first word may be among them.
  plan.coordinator.server_counts(ServerCounts{0, 5, 0, 0}, kUnheardT0 + 3s);
  for (auto at : {5s, 10s, 15s, 20s, 25s}) {
    ASSERT_EQ(plan.beat(0, 0, at.count(), at).status, 200);
    ASSERT_EQ(plan.beat(2, 1, at.count(), at).status, 200);
    plan.tick(at);
  }
  EXPECT_TRUE(plan.lost.empty()) << "named lost while our own server refused connections";
  plan.tick(30s);
  ASSERT_EQ(plan.lost.size(), 1U);
  EXPECT_EQ(plan.lost[0].substr(0, plan.lost[0].find(':')), "u-node-0-2.u");
}

TEST(UnheardHosts, AHostHeardOnceIsJudgedByItsBeatsAndTheEndStopsAllJudging) {
  Plan plan(kUnheardHosts);
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.report(4, 2, RankEventKind::kStart, 1s).status, 200);
  ASSERT_EQ(plan.beat(0, 0, 1, 10s).status, 200);
  ASSERT_EQ(plan.beat(2, 1, 1, 10s).status, 200);
  plan.tick(16s);
  // Host 2 spoke at 1 s and then fell silent: lost by its beats' rule, 15 s after its last word.
  ASSERT_EQ(plan.lost.size(), 1U);
  EXPECT_EQ(plan.lost[0], "u-node-0-2.u: no beat from its 1 running rank agent(s) for 15 s");

  Plan ended(kUnheardHosts);
  ASSERT_EQ(ended.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  ended.coordinator.end_job();  // mpirun has exited: nothing more is expected of anyone
  ended.tick(100s);
  EXPECT_TRUE(ended.lost.empty()) << ended.lost.front();
}

TEST(UnheardHosts, AHostWhoseReportWaitsOnADnsLookupIsNotJudgedMeanwhile) {
  Plan plan({kUnheardHosts[0], kUnheardHosts[1]});
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  // Host 1's first report arrived at 1 s, but its lookup waits behind a slow one until 20 s.
  plan.coordinator.lookup_started(kUnheardHosts[1]);
  ASSERT_EQ(plan.beat(0, 0, 1, 10s).status, 200);
  plan.tick(16s);
  EXPECT_TRUE(plan.lost.empty()) << "a host named lost while its report waited on DNS: " << plan.lost.front();
  plan.coordinator.lookup_ended(kUnheardHosts[1]);
  ASSERT_EQ(plan.report(2, 1, RankEventKind::kStart, 20s).status, 200);
  plan.tick(21s);
  EXPECT_TRUE(plan.lost.empty()) << plan.lost.front();
  // A lookup that ends with the report refused (another address) leaves the host unheard.
  Plan refused({kUnheardHosts[0], kUnheardHosts[1]});
  ASSERT_EQ(refused.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  refused.coordinator.lookup_started(kUnheardHosts[1]);
  refused.coordinator.lookup_ended(kUnheardHosts[1]);
  ASSERT_EQ(refused.beat(0, 0, 1, 10s).status, 200);
  refused.tick(16s);
  ASSERT_EQ(refused.lost.size(), 1U);
  EXPECT_EQ(refused.lost[0].substr(0, refused.lost[0].find(':')), kUnheardHosts[1]);
}

TEST(UnheardHosts, AHostWhoseSidecarBeatsIsHeardFrom) {
  // With sidecars, a host's ranks may be held (its agents at a start gate whose answers are
  // forged on its path, then reporting their own exit): its sidecar speaks for it.
  Plan plan({kUnheardHosts[0], kUnheardHosts[1]});
  for (std::size_t host : {0U, 1U}) {
    Registration hello{kUnheardHosts[host], 2, 0, true, "", kVersion, random_nonce()};
    Call call{
        "POST", kRegisterPath, signed_body(kUnheardKey, hello), Plan::address(host), {Plan::address(host)}};
    ASSERT_EQ(plan.coordinator.handle(call, kUnheardT0).status, 200);
  }
  ASSERT_EQ(plan.report(0, 0, RankEventKind::kStart, 0s).status, 200);
  for (long long seq = 1; seq <= 3; ++seq) {
    for (std::size_t host : {0U, 1U}) {
      Call beat{"POST",
                kBeatPath,
                signed_body(kUnheardKey, Beat{kUnheardHosts[host], seq}),
                Plan::address(host),
                {}};
      ASSERT_EQ(plan.coordinator.handle(beat, kUnheardT0 + std::chrono::seconds(seq * 5)).status, 200);
    }
    ASSERT_EQ(plan.beat(0, 0, seq, std::chrono::seconds(seq * 5)).status, 200);
    plan.tick(std::chrono::seconds(seq * 5));
  }
  plan.tick(16s);
  EXPECT_TRUE(plan.lost.empty()) << "a host whose sidecar beats was named for its ranks' silence: "
                                 << plan.lost.front();
}

TEST(UnheardHosts, AStartSentAgainIsTheSameStart) {
  // The agent sends its start again when the first answer came too late for it: taken, and
  // answered, but told to the launcher once, which counts each rank's start once.
  Plan plan(kUnheardHosts);
  ASSERT_EQ(plan.report(4, 2, RankEventKind::kStart, 0s).status, 200);
  ASSERT_EQ(plan.beat(4, 2, 1, 1s).status, 200);
  ASSERT_EQ(plan.report(4, 2, RankEventKind::kStart, 1s).status, 200);
  EXPECT_EQ(plan.beat(4, 2, 1, 2s).status, 403) << "the beats' seq goes on from before the start sent again";
  ASSERT_EQ(plan.report(4, 2, RankEventKind::kExit, 2s).status, 200);
  EXPECT_EQ(plan.events, (std::vector<int>{4, 4})) << "a start and an exit, each once";
}

}  // namespace
}  // namespace tmpi::rdv
