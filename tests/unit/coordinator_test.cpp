// The rendezvous engine, driven with no sockets, DNS or clock: order of arrival, a
// duplicate, impostors (no key, wrong address, replay), a node whose sshd refused the
// key, the deadline, a lost host, the job ending, and the endpoints. The ranks' agents
// are coordinator_ranks_test.cpp's; the fixture is coordinator_fixture.h.
#include <pthread.h>

#include <functional>

#include "coordinator_fixture.h"

namespace tmpi::rdv {
namespace {

using namespace coordinator_testing;
using nlohmann::json;
using namespace std::chrono_literals;

TEST_F(CoordinatorTest, BarrierOpensWhenEveryHostIsReadyInAnyOrder) {
  for (auto host : {kHosts[2], kHosts[0]}) EXPECT_EQ(send(register_call(host)).status, 200);
  EXPECT_FALSE(coordinator_.barrier_open());
  EXPECT_EQ(coordinator_.summary(), "2/3 hosts ready; waiting for j-node-0-1.j (no registration)");
  EXPECT_EQ(send(Call{"GET", "/readyz", "", "127.0.0.1", {}}).status, 503);
  EXPECT_EQ(send(register_call(kHosts[1])).status, 200);
  EXPECT_TRUE(coordinator_.barrier_open());
  EXPECT_EQ(events_.opened, 1);
  EXPECT_EQ(send(Call{"GET", "/readyz", "", "127.0.0.1", {}}).status, 200);
}

TEST_F(CoordinatorTest, ImpostorsAreRefusedWithAReason) {
  auto no_key = register_call(kHosts[0], true, derive_rendezvous_key("another key"));
  EXPECT_EQ(send(no_key).status, 403);
  auto wrong_address = register_call(kHosts[0]);
  wrong_address.peer = "10.6.6.6";
  Reply reply = send(wrong_address);
  EXPECT_EQ(reply.status, 403);
  EXPECT_NE(reply.body.find("does not resolve to the sender's address 10.6.6.6"), std::string::npos)
      << reply.body;
  EXPECT_EQ(send(register_call("j-node-0-9.j")).status, 404);
  EXPECT_EQ(send(Call{"POST", "/v1/register", "{not json", "10.0.0.1", {}}).status, 400);
  ASSERT_EQ(events_.refused.size(), 4U);
  EXPECT_NE(events_.refused[0].find("bad proof"), std::string::npos);
  EXPECT_EQ(coordinator_.ready_count(), 0);
}

TEST_F(CoordinatorTest, ReplayedNonceAndSecondClaimAreRefused) {
  Call first = register_call(kHosts[0], true, kCoordinatorKey, "nonce-1");
  EXPECT_EQ(send(first).status, 200);
  EXPECT_EQ(send(first).status, 403);  // the same message again
  Call other = register_call(kHosts[0]);
  other.peer = "10.0.0.77";
  other.resolved = {"10.0.0.1", "10.0.0.77"};
  Reply reply = send(other);
  EXPECT_EQ(reply.status, 409);
  EXPECT_NE(reply.body.find("already registered from 10.0.0.1, which the name still resolves to"),
            std::string::npos);
  // A duplicate registration from the same address (a sidecar restart) is fine.
  EXPECT_EQ(send(register_call(kHosts[0])).status, 200);
}

TEST_F(CoordinatorTest, APodRecreatedBeforeTheBarrierTakesItsPlace) {
  EXPECT_EQ(send(register_call(kHosts[0])).status, 200);
  // The pod is deleted and made again: the same name, a new IP, and DNS now says so.
  Call again = register_call(kHosts[0]);
  again.peer = "10.0.0.77";
  again.resolved = {"10.0.0.77"};
  EXPECT_EQ(send(again).status, 200);
  EXPECT_NE(coordinator_.hosts_json(t0_).find("10.0.0.77"), std::string::npos)
      << coordinator_.hosts_json(t0_);
  EXPECT_NE(coordinator_.metrics().find("tmpi_rendezvous_reregistrations_total 1"), std::string::npos);
  // The old pod's beats are refused now: it is not the host any more.
  EXPECT_EQ(send(beat_call(kHosts[0], 1)).status, 409);
  EXPECT_TRUE(events_.lost.empty());
}

TEST_F(CoordinatorTest, APodRecreatedAfterTheBarrierIsLostAtOnce) {
  for (const auto& host : kHosts) ASSERT_EQ(send(register_call(host)).status, 200);
  ASSERT_TRUE(coordinator_.barrier_open());
  Call again = register_call(kHosts[1]);
  again.peer = "10.0.0.77";
  again.resolved = {"10.0.0.77"};
  Reply reply = send(again);
  EXPECT_EQ(reply.status, 409);
  ASSERT_EQ(events_.lost.size(), 1U);
  EXPECT_NE(events_.lost[0].find(kHosts[1]), std::string::npos);
  EXPECT_NE(events_.lost[0].find("recreated at 10.0.0.77 (was 10.0.0.2) after the job started"),
            std::string::npos)
      << events_.lost[0];
}

Call leave_call(const std::string& host, const std::string& from, const std::string& key = kCoordinatorKey) {
  return Call{"POST", "/v1/leave", signed_body(key, Leave{host, random_nonce()}), from, {}};
}

TEST_F(CoordinatorTest, ALeavingSidecarLosesItsHostAtOnceAfterTheBarrier) {
  for (const auto& host : kHosts) ASSERT_EQ(send(register_call(host)).status, 200);
  ASSERT_TRUE(coordinator_.barrier_open());
  EXPECT_EQ(send(leave_call(kHosts[1], "10.0.0.2", derive_rendezvous_key("another key"))).status, 403);
  EXPECT_EQ(send(leave_call(kHosts[1], "10.0.0.9")).status, 409) << "only the pod that holds the name";
  EXPECT_EQ(send(Call{"POST", "/v1/leave", R"({"host":7})", "10.0.0.2", {}}).status, 400);
  EXPECT_TRUE(events_.lost.empty());
  Call leave = leave_call(kHosts[1], "10.0.0.2");
  EXPECT_EQ(send(leave, 1s).status, 200);
  ASSERT_EQ(events_.lost.size(), 1U) << "named when it leaves, not lost_after (15 s) later";
  EXPECT_EQ(events_.lost[0], "j-node-0-1.j: its pod is being deleted: its sidecar got SIGTERM");
  EXPECT_EQ(send(leave, 1s).status, 403) << "a replayed leave";
  coordinator_.tick(t0_ + 10s);  // the others beat-free for 10 s, within lost_after (15 s)
  EXPECT_EQ(events_.lost.size(), 1U) << "named once";
}

TEST_F(CoordinatorTest, ALeavingSidecarBeforeTheBarrierOrAfterTheEndLosesNothing) {
  ASSERT_EQ(send(register_call(kHosts[0])).status, 200);
  EXPECT_EQ(send(leave_call(kHosts[0], "10.0.0.1")).status, 200);
  EXPECT_TRUE(events_.lost.empty());
  EXPECT_EQ(coordinator_.ready_count(), 0) << "it waits again, for its next pod";
  EXPECT_EQ(send(register_call(kHosts[0])).status, 200);
  for (const auto& host : kHosts) send(register_call(host));
  coordinator_.end_job();
  EXPECT_EQ(send(leave_call(kHosts[2], "10.0.0.3")).status, 200);
  EXPECT_TRUE(events_.lost.empty()) << "pods go away after the end; that is no loss";
}

TEST_F(CoordinatorTest, SshFailureIsNamedAtTheDeadline) {
  send(register_call(kHosts[0]));
  send(register_call(kHosts[1], false));
  coordinator_.tick(t0_ + 6s);
  ASSERT_EQ(events_.progress.size(), 1U);
  EXPECT_EQ(
      events_.progress[0],
      "1/3 hosts ready; waiting for j-node-0-1.j (sshd refused the job key), j-node-0-2.j (no registration)");
  coordinator_.tick(t0_ + 7s);
  EXPECT_EQ(events_.progress.size(), 1U) << "progress at most every 5 s";
  coordinator_.tick(t0_ + 61s);
  ASSERT_EQ(events_.deadline.size(), 1U);
  EXPECT_NE(events_.deadline[0].find("j-node-0-1.j (sshd refused the job key)"), std::string::npos);
  // A late registration after the deadline does not open the barrier.
  send(register_call(kHosts[1]), 62s);
  send(register_call(kHosts[2]), 62s);
  EXPECT_FALSE(coordinator_.barrier_open());
}

TEST_F(CoordinatorTest, HostWhoseBeatsStopIsLost) {
  for (const auto& host : kHosts) send(register_call(host));
  ASSERT_TRUE(coordinator_.barrier_open());
  for (long long seq = 1; seq <= 3; ++seq) {
    for (const auto& host : {kHosts[0], kHosts[1]})
      EXPECT_EQ(send(beat_call(host, seq), std::chrono::seconds(seq * 5)).status, 200);
  }
  coordinator_.tick(t0_ + 16s);
  ASSERT_EQ(events_.lost.size(), 1U);
  EXPECT_EQ(events_.lost[0], "j-node-0-2.j: no beat for 16 s");
  EXPECT_EQ(send(beat_call(kHosts[0], 3)).status, 403) << "a replayed beat";
  EXPECT_EQ(send(beat_call(kHosts[2], 9)).status, 409) << "a lost host must register again";
  json hosts = json::parse(send(Call{"GET", "/v1/hosts", "", "", {}}, 16s).body);
  EXPECT_EQ(hosts["hosts"][2]["state"], "lost");
  EXPECT_EQ(hosts["ready"], 2);
}

TEST_F(CoordinatorTest, JobEndIsToldToSidecars) {
  for (const auto& host : kHosts) send(register_call(host));
  std::string end = signed_body(kCoordinatorKey, EndJob{random_nonce()});
  EXPECT_EQ(send(Call{"POST", "/v1/end", json{{"nonce", "x"}, {"proof", "00"}}.dump(), "", {}}).status, 403);
  EXPECT_EQ(send(Call{"POST", "/v1/end", end, "", {}}).status, 200);
  Reply beat = send(beat_call(kHosts[0], 1));
  EXPECT_EQ(json::parse(beat.body)["jobEnded"], true);
  coordinator_.tick(t0_ + 100s);
  EXPECT_TRUE(events_.lost.empty()) << "after the end, silence is not a loss";
}

TEST_F(CoordinatorTest, EveryFieldOfARegistrationIsSigned) {
  for (const char* field : {"sshProblem", "version", "slots", "sshReady"}) {
    Call call = register_call(kHosts[0], false);
    json body = json::parse(call.body);
    if (body[field].is_string()) {
      body[field] = "changed";
    } else if (body[field].is_boolean()) {
      body[field] = true;
    } else {
      body[field] = 1;
    }
    call.body = body.dump();
    EXPECT_EQ(send(call).status, 403) << field;
  }
  EXPECT_EQ(coordinator_.ready_count(), 0);
}

TEST_F(CoordinatorTest, MetricsAndUnknownEndpoints) {
  send(register_call(kHosts[0]));
  send(register_call("nobody"));
  std::string metrics = send(Call{"GET", "/metrics", "", "", {}}).body;
  EXPECT_NE(metrics.find("tmpi_rendezvous_hosts{state=\"ready\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tmpi_rendezvous_hosts{state=\"waiting\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("tmpi_rendezvous_refusals_total 1"), std::string::npos);
  EXPECT_NE(metrics.find("tmpi_rendezvous_registrations_total 1"), std::string::npos);
  EXPECT_EQ(send(Call{"GET", "/nope", "", "", {}}).status, 404);
  EXPECT_EQ(send(Call{"GET", "/healthz", "", "", {}}).status, 200);
  Call known = register_call(kHosts[1]), unknown = register_call("nobody");
  EXPECT_EQ(coordinator_.host_to_resolve(known), kHosts[1]);
  EXPECT_TRUE(known.parsed.is_object()) << "parsed once, for handle() to reuse";
  EXPECT_EQ(send(known).status, 200);
  EXPECT_FALSE(coordinator_.host_to_resolve(unknown));
  // No DNS for a registration that is not signed with the job's key: anyone can reach the
  // port, and none may make the coordinator resolve names.
  Call forged = register_call(kHosts[2], true, derive_rendezvous_key("another key"));
  EXPECT_FALSE(coordinator_.host_to_resolve(forged));
  EXPECT_EQ(send(forged).status, 403);
  Call unsigned_call{"POST", "/v1/register", json{{"host", kHosts[2]}}.dump(), "", {}};
  EXPECT_FALSE(coordinator_.host_to_resolve(unsigned_call));
}

}  // namespace
}  // namespace tmpi::rdv

namespace tmpi::rdv {
namespace {

// Found by fuzz_rendezvous_request: a target with invalid UTF-8 made the reply's JSON
// serialisation throw, which would have ended the coordinator's I/O thread.
TEST(CoordinatorWire, InvalidUtf8InTheTargetGetsA404NotAnException) {
  CoordinatorConfig config;
  config.hosts = {"a.j"};
  config.key = "k";
  Coordinator coordinator(config, {}, Clock::now());
  Reply reply = coordinator.handle(Call{"GET", "/v1/hos\xff\xffts", "", "10.0.0.1", {}}, Clock::now());
  EXPECT_EQ(reply.status, 404);
  EXPECT_FALSE(reply.body.empty());
}

// Runs `body` on a thread with 1 MiB of stack, where the recursion of a copy or a dump of a
// 32,000-level document would not fit (the coordinator's thread has 8 MiB, less under load).
void on_small_stack(const std::function<void()>& body) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, std::size_t{1} << 20);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&body)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// A deep body on any route is refused, from anyone, before a DNS lookup or a proof
// (protocol.h, parse_body), and costs no stack; the coordinator goes on.
TEST_F(CoordinatorTest, ADeepBodyIsRefusedOnEveryRoute) {
  std::string deep =
      R"({"host":"j-node-0-0.j","x":)" + std::string(32000, '[') + std::string(32000, ']') + "}";
  on_small_stack([&] {
    for (const char* path :
         {"/v1/register", "/v1/beat", "/v1/rank", "/v1/leave", "/v1/end", "/v1/rank-beat"}) {
      Call call{"POST", path, deep, "10.0.0.1", {}};
      EXPECT_EQ(coordinator_.host_to_resolve(call), std::nullopt) << path;
      int status = send(call).status;
      EXPECT_TRUE(status == 400 || status == 403) << path << ": " << status;
    }
  });
  for (const auto& host : kHosts) EXPECT_EQ(send(register_call(host)).status, 200);
  EXPECT_TRUE(coordinator_.barrier_open());
}

}  // namespace
}  // namespace tmpi::rdv
