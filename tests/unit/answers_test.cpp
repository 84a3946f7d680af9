// The coordinator's answers (rendezvous/protocol.h): one serialisation and one proof, over
// the request's kind and nonce, the status and every field. An answer moved to another
// question, status or key, or changed on the way, is no answer; the coordinator's own
// answers verify for the request that asked; and a client that is sent a forged answer
// (here the sidecar, told `jobEnded: true` by an impostor) does not act on it.
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/proof.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/http_server.h"
#include "rendezvous/protocol.h"
#include "rendezvous/sidecar.h"

namespace tmpi::rdv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kAnswersKey = derive_rendezvous_key("answers test key");

TEST(Answers, AnAnswerVerifiesOnlyForItsQuestionItsStatusAndItsKey) {
  std::string body = answer_body(kAnswersKey, Kind::kBeat, "n1", BeatTaken{true, false});
  auto taken = read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n1", 200, body);
  ASSERT_TRUE(taken);
  ASSERT_TRUE(std::holds_alternative<BeatTaken>(*taken));
  EXPECT_TRUE(std::get<BeatTaken>(*taken).barrier_open);
  EXPECT_FALSE(std::get<BeatTaken>(*taken).job_ended);
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n2", 200, body)) << "another question's";
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kRankBeat, "n1", 200, body)) << "another kind's";
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n1", 409, body)) << "another status";
  EXPECT_FALSE(read_answer<BeatTaken>(derive_rendezvous_key("x"), Kind::kBeat, "n1", 200, body));
  json changed = json::parse(body);
  changed["jobEnded"] = true;
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n1", 200, changed.dump()));
  json unsigned_body = json::parse(body);
  unsigned_body.erase("proof");
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n1", 200, unsigned_body.dump()));
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n1", 200, "<html>busy</html>"));
  EXPECT_FALSE(read_answer<JobState>(kAnswersKey, Kind::kBeat, "n1", 200, R"({"jobEnded": true})"));
}

TEST(Answers, EachAnswerRoundTripsAndARefusalIsSignedWithItsStatus) {
  auto registered =
      read_answer<Registered>(kAnswersKey, Kind::kRegister, "n", 200,
                              answer_body(kAnswersKey, Kind::kRegister, "n", Registered{false, 250, true}));
  ASSERT_TRUE(registered && std::holds_alternative<Registered>(*registered));
  EXPECT_EQ(std::get<Registered>(*registered).beat_millis, 250);
  EXPECT_TRUE(std::get<Registered>(*registered).job_ended);
  auto stop = read_answer<StartAnswer>(
      kAnswersKey, Kind::kMayStart, "n", 200,
      answer_body(kAnswersKey, Kind::kMayStart, "n", StartAnswer{Decision::kStop, "why"}));
  ASSERT_TRUE(stop && std::holds_alternative<StartAnswer>(*stop));
  EXPECT_EQ(std::get<StartAnswer>(*stop).decision, Decision::kStop);
  EXPECT_EQ(std::get<StartAnswer>(*stop).reason, "why");
  auto epoch = read_answer<EpochTold>(kAnswersKey, Kind::kHello, "n", 200,
                                      answer_body(kAnswersKey, Kind::kHello, "n", EpochTold{"e"}));
  ASSERT_TRUE(epoch && std::holds_alternative<EpochTold>(*epoch));
  EXPECT_EQ(std::get<EpochTold>(*epoch).epoch, "e");
  std::string refusal = answer_body(kAnswersKey, Kind::kBeat, "n", Refusal{409, kStaleEpoch});
  auto refused = read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n", 409, refusal);
  ASSERT_TRUE(refused && std::holds_alternative<Refusal>(*refused));
  EXPECT_EQ(std::get<Refusal>(*refused).why, kStaleEpoch);
  EXPECT_FALSE(read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, "n", 200, refusal)) << "a 409 is no 200";
  EXPECT_FALSE(read_answer<StartAnswer>(kAnswersKey, Kind::kMayStart, "n", 200,
                                        answer_body(kAnswersKey, Kind::kMayStart, "n", JobState{false})))
      << "a signed body of another shape is no answer";
}

TEST(Answers, TheCoordinatorsAnswersVerifyForTheRequestThatAsked) {
  CoordinatorConfig config;
  config.hosts = {"h.j"};
  config.key = kAnswersKey;
  config.epoch = "e1";
  config.gated = true;
  Coordinator coordinator(config, {}, Clock::time_point{} + 1000h);
  auto now = Clock::time_point{} + 1000h;
  Registration registration{"h.j", 8, 0, true, "", kVersion, random_nonce(), "e1"};
  Reply registered = coordinator.handle(
      Call{"POST", kRegisterPath, signed_body(kAnswersKey, registration), "10.0.0.1", {"10.0.0.1"}}, now);
  EXPECT_TRUE(read_answer<Registered>(kAnswersKey, Kind::kRegister, registration.nonce, registered.status,
                                      registered.body));
  MayStart question{0, "h", "e1", random_nonce()};
  Reply wait = coordinator.handle(
      Call{"POST", kMayStartPath, signed_body(kAnswersKey, question), "10.0.0.1", {}}, now);
  auto decided =
      read_answer<StartAnswer>(kAnswersKey, Kind::kMayStart, question.nonce, wait.status, wait.body);
  ASSERT_TRUE(decided && std::holds_alternative<StartAnswer>(*decided)) << wait.body;
  EXPECT_EQ(std::get<StartAnswer>(*decided).decision, Decision::kWait);
  Beat stale{"h.j", 1, "e0", random_nonce()};
  Reply refused =
      coordinator.handle(Call{"POST", kBeatPath, signed_body(kAnswersKey, stale), "10.0.0.1", {}}, now);
  auto again = read_answer<BeatTaken>(kAnswersKey, Kind::kBeat, stale.nonce, refused.status, refused.body);
  ASSERT_TRUE(again && std::holds_alternative<Refusal>(*again)) << refused.body;
  EXPECT_EQ(std::get<Refusal>(*again).status, 409);
  Reply stranger = coordinator.handle(Call{"POST",
                                           kBeatPath,
                                           signed_body(derive_rendezvous_key("x"), Beat{"h.j", 2, "e1", "n"}),
                                           "10.0.0.1",
                                           {}},
                                      now);
  EXPECT_EQ(stranger.status, 403);
  EXPECT_FALSE(json::parse(stranger.body).contains("proof")) << "no answer is signed for a stranger";
}

// An impostor on the coordinator's port (or on the path) that answers every request with a
// 200 `jobEnded: true`: before answers were signed, the sidecar exited 0 on the first one.
TEST(Answers, ASidecarToldOfTheEndByAnImpostorKeepsWaiting) {
  ManualClock clock;
  clock.autopilot(1);
  boost::asio::io_context io;
  int calls = 0;
  HttpServer impostor(io, [&](const Call&, const Respond& respond) {
    ++calls;
    respond(Reply{200, R"({"accepted": true, "barrier": "open", "beatMillis": 100, "jobEnded": true,
                           "epoch": "e", "proof": "00"})",
                  "application/json"});
  });
  auto port = impostor.listen("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  std::thread loop([&] { io.run(); });
  SidecarOptions options;
  options.host = "127.0.0.1";
  options.coordinator = fmt::format("127.0.0.1:{}", *port);
  options.private_key = "answers test private key";
  options.ssh_port = 1;
  options.deadline = 1500ms;
  Sidecar sidecar(options, clock);
  Status status = sidecar.run();
  io.stop();
  loop.join();
  ASSERT_FALSE(status) << "the sidecar took a forged jobEnded for the end";
  EXPECT_EQ(status.error().exit, Exit::kTempFail);
  EXPECT_NE(status.error().message.find("no valid proof"), std::string::npos) << status.error().message;
  EXPECT_GE(calls, 2);
}

}  // namespace
}  // namespace tmpi::rdv
