// The engine's bounds, driven with its time given (no sockets, no clock): our own server's
// overload does not get a healthy host named lost (for one lost_after more, never longer);
// a rank report is taken only for a rank in [0, np), a host of hosts.json, and from that
// host's address; the rank table holds np entries at most; refusals are counted, and their
// log lines are few and short.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kBoundsKey = derive_rendezvous_key("bounds test key");
const std::string kBoundsHost = "j-node-0-0.j";
const std::string kBoundsPeer = "10.0.0.1";
const Clock::time_point kBoundsT0 = Clock::time_point{} + 1000h;

struct Engine {
  explicit Engine(int np = 0) : coordinator(config(np), callbacks(), kBoundsT0) {}
  static CoordinatorConfig config(int np) {
    CoordinatorConfig c;
    c.hosts = {kBoundsHost};
    c.key = kBoundsKey;
    c.lost_after = 15s;
    c.np = np;
    return c;
  }
  CoordinatorCallbacks callbacks() {
    CoordinatorCallbacks c;
    c.host_lost = [this](const std::string& host, const std::string&) { lost.push_back(host); };
    c.refused = [this](const std::string& line) { logged.push_back(line); };
    return c;
  }
  Reply post(const char* path, const std::string& body, Clock::time_point at = kBoundsT0,
             const std::string& from = kBoundsPeer) {
    return coordinator.handle(Call{"POST", path, body, from, {kBoundsPeer}}, at);
  }
  // A rank's start report from `from`; the service resolves the host first when the engine asks.
  Reply start(int rank, const std::string& host, const std::string& from, bool* looked_up = nullptr) {
    Call call{"POST",
              kRankPath,
              signed_body(kBoundsKey,
                          RankReport{rank, host, RankEventKind::kStart, 0, 0, 0, "", random_nonce(), ""}),
              from,
              {}};
    auto lookup = coordinator.host_to_resolve(call);
    if (lookup && *lookup == kBoundsHost)
      call.resolved = {kBoundsPeer};  // kBoundsHost's name resolves to kBoundsPeer
    if (looked_up != nullptr) *looked_up = lookup.has_value();
    return coordinator.handle(call, kBoundsT0);
  }
  std::string metric(const std::string& name) const {
    std::string metrics = coordinator.metrics(), line = "\ntmpi_rendezvous_" + name + "_total ";
    auto at = metrics.find(line);
    if (at == std::string::npos) return "";
    std::size_t value = at + line.size();
    return metrics.substr(value, metrics.find('\n', value) - value);
  }
  std::vector<std::string> lost, logged;
  Coordinator coordinator;
};

TEST(CoordinatorBounds, OurOwnRefusalsHoldBackLossDetectionForOneLostAfterAtMost) {
  Engine engine;
  auto registration = Registration{kBoundsHost, 1, 0, true, "", kVersion, random_nonce()};
  ASSERT_EQ(engine.post(kRegisterPath, signed_body(kBoundsKey, registration)).status, 200);
  ASSERT_TRUE(engine.coordinator.barrier_open());
  engine.coordinator.server_counts(ServerCounts{}, kBoundsT0);
  // 10 s after the last beat the server refused a connection at its cap: that may have
  // been the next beat, so the host is not named at 15 s of silence...
  engine.coordinator.server_counts(ServerCounts{0, 3, 0, 0}, kBoundsT0 + 10s);
  engine.coordinator.tick(kBoundsT0 + 16s);
  engine.coordinator.tick(kBoundsT0 + 29s);
  EXPECT_TRUE(engine.lost.empty()) << "a host named lost while our own server refused connections";
  // ...but an overload cannot hide a dead host for long: at twice lost_after it is named.
  engine.coordinator.tick(kBoundsT0 + 30s);
  EXPECT_EQ(engine.lost, std::vector<std::string>{kBoundsHost});
  EXPECT_NE(engine.coordinator.metrics().find("tmpi_rendezvous_connections_refused_total 3\n"),
            std::string::npos);
}

TEST(CoordinatorBounds, EvictionsAloneAreNoOverload) {
  Engine engine;
  auto registration = Registration{kBoundsHost, 1, 0, true, "", kVersion, random_nonce()};
  ASSERT_EQ(engine.post(kRegisterPath, signed_body(kBoundsKey, registration)).status, 200);
  // Strangers' connections evicted to make room: every new connection was taken, so a
  // silent host is silent on its own.
  engine.coordinator.server_counts(ServerCounts{500, 0, 40, 0}, kBoundsT0 + 10s);
  engine.coordinator.tick(kBoundsT0 + 15s);
  EXPECT_EQ(engine.lost, std::vector<std::string>{kBoundsHost});
}

// A misplaced rank runs on a host that hosts.json does not give it, maybe on none of the job's
// (the launcher's pod, where Open MPI 5 ran every rank): its report is taken from the address
// that host's name resolves to, and from nowhere else.
TEST(CoordinatorBounds, AMisplacedRankIsHeardFromAHostOutsideTheJobOnlyFromThatHostsAddress) {
  Engine engine(8);
  auto misplaced = [&](const std::string& from) {
    Call call{"POST",
              kRankPath,
              signed_body(kBoundsKey, RankReport{1, "j-launcher-0-0.j", RankEventKind::kMisplaced, 69, 0, 0,
                                                 "", random_nonce(), kBoundsHost}),
              from,
              {}};
    auto lookup = engine.coordinator.host_to_resolve(call);
    EXPECT_TRUE(lookup.has_value()) << "a misplaced report's host was not looked up";
    call.resolved = {"10.0.0.9"};  // the launcher pod's name resolves to 10.0.0.9
    return engine.coordinator.handle(call, kBoundsT0);
  };
  EXPECT_EQ(misplaced("10.0.0.66").status, 404) << "taken from an address its host's name does not have";
  EXPECT_TRUE(engine.coordinator.ranks().empty());
  EXPECT_EQ(misplaced("10.0.0.9").status, 200);
  ASSERT_EQ(engine.coordinator.ranks().size(), 1U);
  EXPECT_EQ(engine.coordinator.ranks().begin()->second.event, RankEventKind::kMisplaced);
}

TEST(CoordinatorBounds, ARankReportIsTakenOnlyForAJobsRankOnItsHostFromThatHostsAddress) {
  Engine engine(8);
  // A key holder's fake start for rank 123456 "on node 0": not a rank of this job.
  Reply out_of_range = engine.start(123456, "j-node-0-0", kBoundsPeer);
  EXPECT_EQ(out_of_range.status, 403);
  EXPECT_NE(out_of_range.body.find("rank 123456 is not a rank of this job (0 to 7)"), std::string::npos);
  EXPECT_EQ(engine.start(1, "node-9", kBoundsPeer).status, 404) << "a host that is not in hosts.json";
  // Node 0's name resolves to 10.0.0.1: a report for it from 10.0.0.66 is another pod's.
  bool looked_up = false;
  Reply elsewhere = engine.start(1, "j-node-0-0", "10.0.0.66", &looked_up);
  EXPECT_TRUE(looked_up);
  EXPECT_EQ(elsewhere.status, 403);
  EXPECT_NE(elsewhere.body.find("does not resolve to the sender's address 10.0.0.66"), std::string::npos);
  EXPECT_TRUE(engine.coordinator.ranks().empty());
  engine.coordinator.tick(kBoundsT0 + 100s);
  EXPECT_TRUE(engine.lost.empty()) << "a refused fake start got its host named lost";
  EXPECT_EQ(engine.metric("rank_refused_out_of_range"), "1");
  EXPECT_EQ(engine.metric("rank_refused_unknown_host"), "1");
  EXPECT_EQ(engine.metric("rank_refused_wrong_address"), "1");
  // From the host's own address: taken, and the next report from there needs no lookup.
  EXPECT_EQ(engine.start(1, "j-node-0-0", kBoundsPeer, &looked_up).status, 200);
  EXPECT_TRUE(looked_up);
  EXPECT_EQ(engine.start(2, "j-node-0-0", kBoundsPeer, &looked_up).status, 200);
  EXPECT_FALSE(looked_up) << "a known sender's report cost a DNS lookup";
  // Its beats come from where its start report came from, and nowhere else.
  auto beat = [&](const std::string& from, long long seq) {
    return engine
        .post(kRankBeatPath, signed_body(kBoundsKey, RankBeat{1, "j-node-0-0", seq}), kBoundsT0, from)
        .status;
  };
  EXPECT_EQ(beat("10.0.0.66", 1), 403);
  EXPECT_EQ(beat(kBoundsPeer, 1), 200);
}

TEST(CoordinatorBounds, TheRankTableHoldsNpEntriesAndTailsAreCut) {
  Engine engine(4);
  for (int rank = 0; rank < 12; ++rank) {
    RankReport report{rank,           kBoundsHost, RankEventKind::kExit, 1, 0, 1, std::string(30 * 1024, 'x'),
                      random_nonce(), ""};
    engine.post(kRankPath, signed_body(kBoundsKey, report));
  }
  EXPECT_EQ(engine.coordinator.ranks().size(), 4U);
  for (const auto& [rank, event] : engine.coordinator.ranks()) EXPECT_LE(event.tail.size(), 24U * 1024);
  // No np given: the sum of hosts.json's slots bounds it.
  Engine slots;
  EXPECT_EQ(slots.start(65536, kBoundsHost, kBoundsPeer).status, 403);
}

TEST(CoordinatorBounds, ARefusalFloodLogsAFewShortLinesWithACount) {
  Engine engine;
  // 200 refused registrations with a name of 16 KiB (made of control bytes and quotes) each.
  const std::string name = std::string(16 * 1024 - 3, 'n') + "\n\"\x1b";
  for (int i = 0; i < 200; ++i) {
    auto registration = Registration{name, 1, 0, true, "", kVersion, random_nonce()};
    engine.post(kRegisterPath, signed_body(kBoundsKey, registration),
                kBoundsT0 + std::chrono::milliseconds(i));
  }
  ASSERT_EQ(engine.logged.size(), 1U) << "one line per reason per interval";
  EXPECT_LT(engine.logged[0].size(), 200U) << engine.logged[0];
  EXPECT_EQ(engine.logged[0].find('\n'), std::string::npos) << "a raw newline of the request reached the log";
  EXPECT_EQ(engine.metric("refusals"), "200") << "every refusal is counted, logged or not";
  engine.coordinator.tick(kBoundsT0 + 5s);
  EXPECT_EQ(engine.logged.size(), 1U);
  engine.coordinator.tick(kBoundsT0 + 11s);  // the interval has passed: the untold ones, counted
  ASSERT_EQ(engine.logged.size(), 2U);
  EXPECT_NE(engine.logged[1].find("199 more refusals (404 /v1/register"), std::string::npos)
      << engine.logged[1];
  std::size_t bytes = engine.logged[0].size() + engine.logged[1].size();
  EXPECT_LT(bytes, 400U) << "200 refusals made " << bytes << " bytes of log";
}

}  // namespace
}  // namespace tmpi::rdv
