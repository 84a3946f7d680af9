// The rendezvous as a session (docs/design.md, "The session and its threat model"): every
// signed request is of one launch's epoch, so a body captured in one launch is refused by
// the next, on the engine with its time given (no clock, no sockets) and over real
// sockets into a restarted coordinator; the sidecar learns the epoch from the signed
// challenge, and learns it again after the restart; the views are served inside the pod only.
#include <future>
#include <thread>

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/params.h"
#include "common/plain_http.h"
#include "common/proof.h"
#include "launcher/mpi_command.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kKey = derive_rendezvous_key("session test key");
const std::string kHost = "j-node-0-0.j";
const std::string kPeer = "10.0.0.1";
const Clock::time_point kT0 = Clock::time_point{} + 1000h;

CoordinatorConfig config_of(const std::string& epoch) {
  CoordinatorConfig config;
  config.hosts = {kHost};
  config.key = kKey;
  config.epoch = epoch;
  return config;
}

Call post(const char* path, const std::string& body) {
  return Call{"POST", path, body, kPeer, {kPeer}};
}

RankReport exit_report(const std::string& epoch, const std::string& host = "j-node-0-0") {
  RankReport report{0, host, RankEventKind::kExit, 1, 0, 3.5, "Traceback", random_nonce(), ""};
  report.epoch = epoch;
  return report;
}

// One launch's coordinator, with what its callbacks saw.
struct Launch {
  explicit Launch(const std::string& epoch) : engine(config_of(epoch), callbacks(), kT0) {}
  CoordinatorCallbacks callbacks() {
    CoordinatorCallbacks c;
    c.rank_event = [this](const RankEvent&) { ++rank_events; };
    c.job_ended = [this] { ended = true; };
    return c;
  }
  int rank_events = 0;
  bool ended = false;
  Coordinator engine;
};

TEST(Session, ARequestOfOneLaunchIsRefusedByTheNextWithANamed409) {
  Launch first("epoch-1"), second("epoch-2");
  const std::string report = signed_body(kKey, exit_report("epoch-1"));
  EXPECT_EQ(first.engine.handle(post(kRankPath, report), kT0).status, 200);
  EXPECT_EQ(first.rank_events, 1);
  Reply replayed = second.engine.handle(post(kRankPath, report), kT0);
  EXPECT_EQ(replayed.status, 409);
  EXPECT_EQ(string_at(parse_object(replayed.body), "/error"), kStaleEpoch);
  EXPECT_EQ(second.rank_events, 0) << "a captured exit report must not end the next launch's job";
  EXPECT_TRUE(second.engine.ranks().empty());

  const std::string end = signed_body(kKey, EndJob{random_nonce(), "epoch-1"});
  Call end_call = post(kEndPath, end);
  end_call.peer = "127.0.0.1";  // the end is taken from loopback only (below)
  EXPECT_EQ(second.engine.handle(end_call, kT0).status, 409);
  EXPECT_FALSE(second.ended);
  EXPECT_FALSE(second.engine.job_ended());

  for (const auto& [path, body] : std::vector<std::pair<const char*, std::string>>{
           {kBeatPath, signed_body(kKey, Beat{kHost, 1, "epoch-1"})},
           {kRankBeatPath, signed_body(kKey, RankBeat{0, "j-node-0-0", 1, "epoch-1"})},
           {kMayStartPath, signed_body(kKey, MayStart{0, "j-node-0-0", "epoch-1"})},
           {kLeavePath, signed_body(kKey, Leave{kHost, random_nonce(), "epoch-1"})},
           {kRankPath, signed_body(kKey, exit_report(""))}}) {
    Reply reply = second.engine.handle(post(path, body), kT0);
    EXPECT_EQ(reply.status, 409) << path << ": " << reply.body;
  }
  EXPECT_EQ(second.engine.handle(post(kRankPath, signed_body(kKey, exit_report("epoch-2"))), kT0).status, 200)
      << "a report of this launch is taken";
}

TEST(Session, ARegistrationOfAnotherLaunchCostsNoLookupAndIsRefused) {
  Launch second("epoch-2");
  Registration old{kHost, 8, 0, true, "", kVersion, random_nonce(), "epoch-1"};
  Call call = post(kRegisterPath, signed_body(kKey, old));
  EXPECT_FALSE(second.engine.host_to_resolve(call)) << "no DNS for a request of another launch";
  Reply reply = second.engine.handle(call, kT0);
  EXPECT_EQ(reply.status, 409);
  EXPECT_EQ(string_at(parse_object(reply.body), "/error"), kStaleEpoch);
  EXPECT_EQ(second.engine.ready_count(), 0);

  Registration fresh = old;
  fresh.epoch = "epoch-2";
  fresh.nonce = random_nonce();
  Call now = post(kRegisterPath, signed_body(kKey, fresh));
  EXPECT_TRUE(second.engine.host_to_resolve(now));
  EXPECT_EQ(second.engine.handle(now, kT0).status, 200);
}

TEST(Session, TheChallengeTellsTheEpochOnlyToAKeyHolder) {
  Launch launch("epoch-7");
  Reply told = launch.engine.handle(post(kHelloPath, signed_body(kKey, Hello{random_nonce()})), kT0);
  EXPECT_EQ(told.status, 200);
  EXPECT_EQ(string_at(parse_object(told.body), "/epoch"), "epoch-7");
  Reply stranger = launch.engine.handle(
      post(kHelloPath, signed_body(derive_rendezvous_key("another key"), Hello{random_nonce()})), kT0);
  EXPECT_EQ(stranger.status, 403);
  EXPECT_EQ(stranger.body.find("epoch-7"), std::string::npos);
  EXPECT_EQ(launch.engine.handle(post(kHelloPath, R"({"proof":"00"})"), kT0).status, 400);
}

TEST(Session, TheEndIsTakenFromLoopbackOnlyNeverFromTheNetwork) {
  Launch launch("epoch-3");
  auto end_from = [&](const std::string& peer) {
    return launch.engine.handle(
        Call{"POST", kEndPath, signed_body(kKey, EndJob{random_nonce(), "epoch-3"}), peer, {}}, kT0);
  };
  Reply from_a_pod = end_from("10.0.0.1");
  EXPECT_EQ(from_a_pod.status, 403);
  EXPECT_NE(from_a_pod.body.find("only from loopback"), std::string::npos) << from_a_pod.body;
  EXPECT_EQ(end_from("fd00::5").status, 403);
  EXPECT_FALSE(launch.engine.job_ended()) << "a key holder on the network must not end loss detection";
  EXPECT_EQ(end_from("127.0.0.1").status, 200);
  EXPECT_TRUE(launch.ended);
}

// The views name every host and its address: a stranger on the pod network gets a 403 that says
// where they are served; a person in the launcher's pod (kubectl exec or port-forward: both
// arrive over loopback) and the launcher itself get them. The probes stay open to all.
TEST(Session, TheViewsAreServedInsideThePodOnly) {
  Launch launch("epoch-4");
  auto get_from = [&](const char* path, const std::string& peer) {
    return launch.engine.handle(Call{"GET", path, "", peer, {}}, kT0);
  };
  for (const char* view : {"/v1/hosts", "/metrics"}) {
    for (const char* stranger : {"10.0.0.9", "fd00::9", "not an address"}) {
      Reply refused = get_from(view, stranger);
      EXPECT_EQ(refused.status, 403) << view << " from " << stranger;
      EXPECT_EQ(refused.body.find(kHost), std::string::npos) << refused.body;
      EXPECT_NE(refused.body.find("loopback only"), std::string::npos) << refused.body;
    }
    for (const char* inside : {"127.0.0.1", "::1", ""}) EXPECT_EQ(get_from(view, inside).status, 200) << view;
  }
  EXPECT_NE(get_from("/v1/hosts", "::1").body.find(kHost), std::string::npos);
  EXPECT_EQ(get_from("/healthz", "10.0.0.9").status, 200);
  EXPECT_EQ(get_from("/readyz", "10.0.0.9").status, 503) << "the barrier is closed: not ready, but answered";
}

// The agents read the epoch (and the gate's opt-out) from their environment: mpirun passes
// on only the names the launcher forwards.
TEST(Session, TheLauncherForwardsTheEpochToItsAgents) {
  const std::string epoch = env_name(param::kEpoch.name), fail_open = env_name(param::kGateFailOpen.name);
  auto names = launch::forwarded_env({epoch, fail_open, "UNRELATED"}, {}, {});
  EXPECT_EQ(names, (std::vector<std::string>{epoch, fail_open}));
}

TEST(Session, TwoLaunchesDrawDifferentEpochs) {
  Topology topology;
  Host host;
  host.name = kHost;
  topology.hosts.push_back(host);
  RendezvousTimes times{60s, 5s, 15s};
  CoordinatorConfig a = coordinator_config(topology, "key", times);
  CoordinatorConfig b = coordinator_config(topology, "key", times);
  EXPECT_EQ(a.epoch.size(), 32U);
  EXPECT_NE(a.epoch, b.epoch);
}

// A coordinator service on 127.0.0.1 in an epoch of its own, as each launcher attempt runs one.
class Served {
 public:
  explicit Served(const std::string& epoch) {
    CoordinatorConfig config = config_of(epoch);
    config.hosts = {"127.0.0.1"};
    CoordinatorCallbacks callbacks;
    callbacks.rank_event = [this](const RankEvent&) { ++rank_events_; };
    service_ = std::make_unique<CoordinatorService>(io_, config, callbacks);
    port_ = *service_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Served() {
    io_.stop();
    thread_.join();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", port_); }
  int rank_events() {
    std::promise<int> seen;
    boost::asio::post(io_, [&] { seen.set_value(rank_events_); });
    return seen.get_future().get();
  }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<CoordinatorService> service_;
  unsigned short port_ = 0;
  std::thread thread_;
  int rank_events_ = 0;  // on the loop's thread
};

TEST(Session, AReportCapturedOnTheWireIsRefusedByARestartedCoordinator) {
  // From 127.0.0.1, the host of this job whose name is that address.
  const std::string captured = signed_body(kKey, exit_report("launch-1", "127.0.0.1"));
  {
    Served first("launch-1");
    auto sent = plain_http("POST", first.address(), kRankPath, captured, 2000ms);
    ASSERT_TRUE(sent) << sent.error().message;
    EXPECT_EQ(sent->status, 200);
    EXPECT_EQ(first.rank_events(), 1);
  }
  Served restarted("launch-2");
  auto replayed = plain_http("POST", restarted.address(), kRankPath, captured, 2000ms);
  ASSERT_TRUE(replayed) << replayed.error().message;
  EXPECT_EQ(replayed->status, 409);
  EXPECT_EQ(string_at(parse_object(replayed->body), "/error"), kStaleEpoch);
  EXPECT_EQ(restarted.rank_events(), 0);
}

}  // namespace
}  // namespace tmpi::rdv
