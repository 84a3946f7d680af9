// The rendezvous engine and the ranks' own agents (mpi-rank), with no sockets, DNS or clock:
// their reports and beats are signed in every field, fresh and from their host's address,
// and without sidecars a host whose agents all fall silent is lost.
#include <functional>

#include "coordinator_fixture.h"

namespace tmpi::rdv {
namespace {

using namespace coordinator_testing;
using nlohmann::json;
using namespace std::chrono_literals;

// A host's pod address, by its hosts.json name or the short name that an agent sends.
std::string address_of(const std::string& host) {
  auto it = kAddress.find(host);
  if (it == kAddress.end()) it = kAddress.find(host + ".j");
  return it == kAddress.end() ? "10.9.9.9" : it->second;
}

// A body signed as the rank agent signs it, then changed by `edit` on the way; sent from its
// host's address, which the host's name resolves to (the service's lookup).
Call rank_call(const RankReport& report, const std::function<void(json&)>& edit = {}) {
  json body = json::parse(signed_body(kCoordinatorKey, report));
  if (edit) edit(body);
  return Call{"POST", "/v1/rank", body.dump(), address_of(report.host), {address_of(report.host)}};
}

TEST_F(CoordinatorTest, RankReportsAreSignedInEveryField) {
  std::vector<RankEvent> seen;
  // The fixture's callbacks do not record rank events: a coordinator of its own.
  CoordinatorCallbacks callbacks;
  callbacks.rank_event = [&](const RankEvent& event) { seen.push_back(event); };
  Coordinator coordinator(config(), callbacks, t0_);
  auto deliver = [&](const Call& call) { return coordinator.handle(call, t0_); };
  RankReport exit{3,
                  "j-node-0-1.j",
                  RankEventKind::kExit,
                  7,
                  0,
                  12.5,
                  "Traceback ...\nValueError: bad input\n",
                  random_nonce(),
                  ""};
  Call sent = rank_call(exit);
  EXPECT_EQ(deliver(sent).status, 200);
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0].rank, 3);
  EXPECT_EQ(seen[0].host, "j-node-0-1.j");
  EXPECT_EQ(seen[0].code, 7);
  EXPECT_DOUBLE_EQ(seen[0].seconds, 12.5);
  EXPECT_EQ(seen[0].tail, exit.tail);
  EXPECT_EQ(deliver(sent).status, 403) << "the same report again (its nonce is spent)";
  // Every field is signed: changing any of them on the way, or adding one, breaks the proof.
  for (const char* field : {"host", "tail", "signal", "seconds", "code", "event", "rank", "extra"}) {
    exit.nonce = random_nonce();
    Call forged = rank_call(exit, [&](json& body) {
      if (std::string(field) == "event") {
        body[field] = "start";
      } else if (body.contains(field) && body[field].is_string()) {
        body[field] = "changed";
      } else {
        body[field] = 9;
      }
    });
    EXPECT_EQ(deliver(forged).status, 403) << field;
  }
  EXPECT_EQ(seen.size(), 1U);
  // A body of the wrong shape is a 400 that says what a report needs, never an exception.
  exit.nonce = random_nonce();
  Reply wrong_type = deliver(rank_call(exit, [](json& body) { body["code"] = "seven"; }));
  EXPECT_EQ(wrong_type.status, 400);
  EXPECT_NE(wrong_type.body.find("code and signal integers"), std::string::npos) << wrong_type.body;
  EXPECT_EQ(deliver(rank_call(exit, [](json& body) { body["rank"] = 1e300; })).status, 400);
  EXPECT_EQ(deliver(Call{"POST", "/v1/rank", "[1,2]", "10.0.0.1", {}}).status, 400);
  EXPECT_EQ(deliver(rank_call(exit, [](json& body) { body["event"] = "restart"; })).status, 400);
}

Call rank_beat_call(int rank, const std::string& host, long long seq,
                    const std::string& key = kCoordinatorKey) {
  return Call{"POST", "/v1/rank-beat", signed_body(key, RankBeat{rank, host, seq}), address_of(host), {}};
}

// Without sidecars (no registration, no barrier), the running ranks' agents are the
// liveness signal: a host whose agents all fall silent is lost, named as hosts.json names it.
TEST_F(CoordinatorTest, AHostWhoseRankAgentsFallSilentIsLostWithoutSidecars) {
  // Ranks 0, 1 on node 0 and rank 2 on node 1 start (agents name their host by its short name).
  for (auto [rank, host] : {std::pair{0, "j-node-0-0"}, {1, "j-node-0-0"}, {2, "j-node-0-1"}}) {
    EXPECT_EQ(send(rank_call(RankReport{rank, host, RankEventKind::kStart, 0, 0, 0, "", random_nonce(), ""}))
                  .status,
              200);
  }
  for (long long seq = 1; seq <= 4; ++seq) {
    // Node 0 lives by rank 1's beats alone; rank 2 on node 1 beats twice, then falls silent.
    EXPECT_EQ(send(rank_beat_call(1, "j-node-0-0", seq), std::chrono::seconds(seq * 5)).status, 200);
    if (seq <= 2) {
      EXPECT_EQ(send(rank_beat_call(2, "j-node-0-1", seq), std::chrono::seconds(seq * 5)).status, 200);
    }
    coordinator_.tick(t0_ + std::chrono::seconds(seq * 5));
  }
  EXPECT_TRUE(events_.lost.empty()) << "node 1's last beat was 10 s ago: not yet lost";
  coordinator_.tick(t0_ + 25s);
  ASSERT_EQ(events_.lost.size(), 1U);
  EXPECT_EQ(events_.lost[0], "j-node-0-1.j: no beat from its 1 running rank agent(s) for 15 s");
  coordinator_.tick(t0_ + 30s);
  EXPECT_EQ(events_.lost.size(), 1U) << "named once; node 0's last beat was 10 s ago";
  EXPECT_EQ(json::parse(send(Call{"GET", "/v1/hosts", "", "", {}}, 30s).body)["hosts"][1]["state"], "lost");
  // A rank that has exited is not expected to beat: its host is not lost for its silence.
  EXPECT_EQ(
      send(rank_call(RankReport{1, "j-node-0-0", RankEventKind::kExit, 0, 0, 30, "", random_nonce(), ""}),
           30s)
          .status,
      200);
  coordinator_.tick(t0_ + 200s);
  ASSERT_EQ(events_.lost.size(), 2U) << "rank 0 still runs on node 0, silent since its start";
  EXPECT_EQ(events_.lost[1], "j-node-0-0.j: no beat from its 1 running rank agent(s) for 200 s");
}

TEST_F(CoordinatorTest, RankBeatsAreSignedFreshAndFromTheRanksHost) {
  EXPECT_EQ(send(rank_beat_call(4, "j-node-0-2", 1)).status, 409) << "no start reported for rank 4";
  EXPECT_EQ(
      send(rank_call(RankReport{4, "j-node-0-2.j", RankEventKind::kStart, 0, 0, 0, "", random_nonce(), ""}))
          .status,
      200);
  EXPECT_EQ(send(rank_beat_call(4, "j-node-0-2", 1, "not the key")).status, 403);
  EXPECT_EQ(send(rank_beat_call(4, "j-node-0-1", 1)).status, 403) << "rank 4 started on node 2";
  EXPECT_EQ(send(rank_beat_call(4, "j-node-0-2", 1)).status, 200);
  EXPECT_EQ(send(rank_beat_call(4, "j-node-0-2", 1)).status, 403) << "a replayed beat";
  EXPECT_EQ(
      send(Call{"POST", "/v1/rank-beat", R"({"rank":-1,"host":"x","seq":1,"proof":"00"})", "", {}}).status,
      400);
  EXPECT_EQ(send(Call{"POST", "/v1/rank-beat", "[]", "", {}}).status, 400);
  coordinator_.end_job();
  coordinator_.tick(t0_ + 100s);
  EXPECT_TRUE(events_.lost.empty()) << "after the end, an agent's silence is not a loss";
}

// The job being stopped (end_ranks): the agents' reports and beats are answered jobEnded, so
// that each ends its rank at once; the sidecars' beats are not, since after a restart in
// place they serve the next attempt.
TEST_F(CoordinatorTest, OnceTheJobIsStoppingTheRankAgentsAreToldAndTheSidecarsAreNot) {
  auto ended = [](const Reply& reply) { return json::parse(reply.body).value("jobEnded", false); };
  Reply started =
      send(rank_call(RankReport{4, "j-node-0-2.j", RankEventKind::kStart, 0, 0, 0, "", random_nonce(), ""}));
  ASSERT_EQ(started.status, 200);
  EXPECT_FALSE(ended(started));
  Reply beat = send(rank_beat_call(4, "j-node-0-2", 1));
  ASSERT_EQ(beat.status, 200);
  EXPECT_FALSE(ended(beat)) << "a running job";
  ASSERT_EQ(send(register_call("j-node-0-2.j")).status, 200);
  coordinator_.end_ranks();
  beat = send(rank_beat_call(4, "j-node-0-2", 2));
  ASSERT_EQ(beat.status, 200);
  EXPECT_TRUE(ended(beat)) << "a running rank's beat, once the job is stopping";
  Reply late =
      send(rank_call(RankReport{5, "j-node-0-2.j", RankEventKind::kStart, 0, 0, 0, "", random_nonce(), ""}));
  ASSERT_EQ(late.status, 200);
  EXPECT_TRUE(ended(late)) << "a start report, as an agent sends one when asked before its start was due";
  Reply sidecar = send(beat_call("j-node-0-2.j", 1));
  ASSERT_EQ(sidecar.status, 200);
  EXPECT_FALSE(ended(sidecar)) << "the sidecars serve the next attempt";
  EXPECT_FALSE(coordinator_.job_ended());
}

}  // namespace
}  // namespace tmpi::rdv
