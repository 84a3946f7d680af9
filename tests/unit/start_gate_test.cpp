// The start gate (agent/gate.h): the request's shape and proof, the coordinator's
// answers as the launcher decides (wait, start, stop with the reason), and the rank agent's
// side against a real coordinator on 127.0.0.1: it holds while the answer is "wait", starts
// or stops on the launcher's word, gives up on a launcher that answered and then fell silent,
// starts when nothing ever answered only under the opt-out, and otherwise starts nothing
// that it cannot verify (a 403, a forged body, silence), each within --lost-after.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/gate.h"
#include "common/json_fields.h"
#include "common/proof.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/protocol.h"

namespace tmpi {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using launch::GateAnswer;
using launch::GateVerdict;
using launch::RankAgentOptions;
using launch::wait_for_start;

const std::string kJobKey =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nstart gate\n-----END OPENSSH PRIVATE KEY-----\n";
const std::string kKey = derive_rendezvous_key(kJobKey);
const Clock::time_point kT0 = Clock::time_point{} + 1000h;

rdv::Call ask(const std::string& body) {
  return rdv::Call{"POST", rdv::kMayStartPath, body, "10.0.0.1", {}};
}
std::string decision(const rdv::Reply& reply) {
  return string_at(parse_object(reply.body), "/decision");
}

rdv::Coordinator engine(bool gated) {
  rdv::CoordinatorConfig config;
  config.hosts = {"j-node-0-0.j"};
  config.key = kKey;
  config.gated = gated;
  return rdv::Coordinator(config, {}, kT0);
}

TEST(StartGate, TheCoordinatorAnswersAsTheLauncherDecided) {
  const std::string question = rdv::signed_body(kKey, rdv::MayStart{3, "j-node-0-0"});
  rdv::Coordinator open = engine(false);
  EXPECT_EQ(decision(open.handle(ask(question), kT0)), "start") << "a job without a gate starts at once";

  rdv::Coordinator gated = engine(true);
  EXPECT_EQ(decision(gated.handle(ask(question), kT0)), "wait");
  EXPECT_EQ(decision(gated.handle(ask(question), kT0)), "wait") << "no nonce: the same question again";
  gated.open_gate();
  EXPECT_EQ(decision(gated.handle(ask(question), kT0)), "start");
  gated.stop_gate("preflight failed on 1 check(s)");
  rdv::Reply stopped = gated.handle(ask(question), kT0);
  EXPECT_EQ(decision(stopped), "stop");
  EXPECT_EQ(string_at(parse_object(stopped.body), "/reason"), "preflight failed on 1 check(s)");
  gated.open_gate();
  EXPECT_EQ(decision(gated.handle(ask(question), kT0)), "stop") << "a stopped gate stays stopped";
  EXPECT_NE(gated.metrics().find("tmpi_rendezvous_start_questions_total 5"), std::string::npos)
      << gated.metrics();

  rdv::Coordinator ended = engine(true);
  ended.end_job();
  EXPECT_EQ(decision(ended.handle(ask(question), kT0)), "stop") << "after the job's end nothing starts";
}

TEST(StartGate, TheQuestionIsSignedInEveryFieldAndChecked) {
  rdv::Coordinator gated = engine(true);
  gated.open_gate();
  EXPECT_EQ(
      gated.handle(ask(rdv::signed_body(derive_rendezvous_key("another job"), rdv::MayStart{0, "h"})), kT0)
          .status,
      403);
  json body = json::parse(rdv::signed_body(kKey, rdv::MayStart{0, "h"}));
  for (const char* field : {"rank", "host", "extra"}) {
    json forged = body;
    forged[field] = std::string(field) == "rank" ? json(9) : json("changed");
    EXPECT_EQ(gated.handle(ask(forged.dump()), kT0).status, 403) << field;
  }
  rdv::Reply wrong = gated.handle(ask(R"({"rank": "zero", "host": "h", "proof": "x"})"), kT0);
  EXPECT_EQ(wrong.status, 400);
  EXPECT_NE(wrong.body.find("rank (integer, 0 or more), host (string) and proof"), std::string::npos);
  EXPECT_EQ(gated.handle(ask(R"({"rank": -1, "host": "h"})"), kT0).status, 400);
  EXPECT_EQ(gated.handle(ask("\xff not json"), kT0).status, 400);
  EXPECT_EQ(gated.handle(ask(R"([1])"), kT0).status, 400);
}

// A coordinator on 127.0.0.1 whose gate the test opens or stops, as the launcher does.
class Launcher {
 public:
  Launcher() {
    rdv::CoordinatorConfig config;
    config.hosts = {"j-node-0-0.j"};
    config.key = kKey;
    config.gated = true;
    service_ = std::make_unique<rdv::CoordinatorService>(io_, config, rdv::CoordinatorCallbacks{});
    port_ = *service_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Launcher() { stop(); }
  void open() {
    boost::asio::post(io_, [this] { service_->engine().open_gate(); });
  }
  void refuse(const std::string& why) {
    boost::asio::post(io_, [this, why] { service_->engine().stop_gate(why); });
  }
  void stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
    service_.reset();  // its socket closes: a later question is refused
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", port_); }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<rdv::CoordinatorService> service_;
  unsigned short port_ = 0;
  std::thread thread_;
};

RankAgentOptions agent(const std::string& coordinator, Millis lost_after) {
  RankAgentOptions options;
  options.coordinator = coordinator;
  options.private_key = kJobKey;
  options.lost_after = lost_after;
  options.start_gate = true;
  return options;
}

// wait_for_start on a thread of its own, so that the test can look while it waits.
struct Asking {
  explicit Asking(const RankAgentOptions& options)
      : result(
            std::async(std::launch::async, [options] { return wait_for_start(options, 1, "j-node-0-0"); })) {}
  bool answered(Millis within) { return result.wait_for(within) == std::future_status::ready; }
  std::future<GateVerdict> result;
};

TEST(StartGate, TheAgentHoldsItsRankUntilTheLauncherSaysStart) {
  Launcher launcher;
  Asking asking(agent(launcher.address(), 10s));
  EXPECT_FALSE(asking.answered(600ms)) << "the rank must wait while the ssh check runs";
  launcher.open();
  ASSERT_TRUE(asking.answered(2s)) << "the open gate was not heard within 2 s";
  GateVerdict verdict = asking.result.get();
  EXPECT_EQ(verdict.answer, GateAnswer::kStart);
  EXPECT_EQ(verdict.reason, "");
}

TEST(StartGate, TheAgentStopsOnTheLaunchersWordAndSaysWhy) {
  Launcher launcher;
  Asking asking(agent(launcher.address(), 10s));
  EXPECT_FALSE(asking.answered(300ms));
  launcher.refuse("preflight failed on 1 check(s); no rank was started (see the table above)");
  ASSERT_TRUE(asking.answered(2s));
  GateVerdict verdict = asking.result.get();
  EXPECT_EQ(verdict.answer, GateAnswer::kStop);
  EXPECT_EQ(verdict.reason, "preflight failed on 1 check(s); no rank was started (see the table above)");
}

TEST(StartGate, ALauncherThatSaidWaitThenFellSilentIsGivenUp) {
  Launcher launcher;
  auto t0 = Clock::now();
  Asking asking(agent(launcher.address(), 1500ms));
  EXPECT_FALSE(asking.answered(400ms));
  launcher.stop();
  ASSERT_TRUE(asking.answered(5s)) << "an agent must not wait past --lost-after for a launcher that is gone";
  GateVerdict verdict = asking.result.get();
  EXPECT_EQ(verdict.answer, GateAnswer::kLost) << verdict.reason;
  EXPECT_NE(verdict.reason.find("said to wait, then did not answer for 1 s"), std::string::npos)
      << verdict.reason;
  EXPECT_GE(Clock::now() - t0, 1500ms);
}

TEST(StartGate, NothingEverAnsweringStartsTheRankAfterLostAfter) {
  Launcher gone;
  std::string address = gone.address();
  gone.stop();  // a port that nothing serves: every question is refused at once
  auto t0 = Clock::now();
  RankAgentOptions fail_open = agent(address, 1s);
  fail_open.gate_fail_open = true;  // the opt-out: without it, silence starts nothing (below)
  GateVerdict verdict = wait_for_start(fail_open, 0, "j-node-0-0");
  EXPECT_EQ(verdict.answer, GateAnswer::kStart);
  EXPECT_NE(verdict.reason.find("did not answer for 1 s"), std::string::npos) << verdict.reason;
  EXPECT_NE(verdict.reason.find("starting without its word"), std::string::npos) << verdict.reason;
  EXPECT_GE(Clock::now() - t0, 1s);
  EXPECT_LT(Clock::now() - t0, 3s) << "it asks again every 250 ms at most";
}

// A stand-in for the launcher on 127.0.0.1 that answers each question as `respond` says:
// given how many came and the question's nonce, the status line and the body.
class FakeGate {
 public:
  using Respond = std::function<std::pair<std::string, std::string>(int asked, const std::string& nonce)>;
  explicit FakeGate(Respond respond) : respond_(std::move(respond)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listener_, 8), 0);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeGate() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", port_); }
  int asked() const { return asked_; }

 private:
  void serve() {
    for (int client; (client = accept(listener_, nullptr, nullptr)) >= 0; close(client)) {
      char request[4096];
      auto got = read(client, request, sizeof request);
      if (got <= 0) continue;
      std::string text(request, static_cast<std::size_t>(got));
      auto body = text.find("\r\n\r\n");
      std::string nonce =
          body == std::string::npos ? "" : string_at(parse_object(text.substr(body + 4)), "/nonce");
      auto [status, reply] = respond_(++asked_, nonce);
      const std::string answer = fmt::format(
          "HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: "
          "close\r\n\r\n{}",
          status, reply.size(), reply);
      if (write(client, answer.data(), answer.size()) < 0) continue;
    }
  }
  Respond respond_;
  int listener_ = -1;
  unsigned short port_ = 0;
  std::atomic<int> asked_{0};
  std::thread thread_;
};

// The launcher's "start", signed over the question's nonce as the coordinator signs it.
std::string signed_start(const std::string& key, const std::string& nonce) {
  return rdv::answer_body(key, rdv::Kind::kMayStart, nonce, rdv::StartAnswer{rdv::Decision::kStart, ""});
}

// A server that answers the first `busy` questions with 503, then "start": what an
// overloaded proxy or server says is no answer, asked again, not a word to start at once.
TEST(StartGate, AServerErrorIsAskedAgainNotTakenForAWordToStart) {
  FakeGate server([](int asked, const std::string& nonce) -> std::pair<std::string, std::string> {
    if (asked <= 3) return {"503 Service Unavailable", "busy"};
    return {"200 OK", signed_start(kKey, nonce)};
  });
  GateVerdict verdict = wait_for_start(agent(server.address(), 10s), 0, "j-node-0-0");
  EXPECT_EQ(verdict.answer, GateAnswer::kStart);
  EXPECT_EQ(verdict.reason, "") << "started on the server's word, not past a 503";
  EXPECT_EQ(server.asked(), 4);
}

// The gate fails closed: what cannot be verified is no answer, and no answer in --lost-after
// keeps the rank from starting (kLost: exit 75), whatever the server said instead.
TEST(StartGate, AnAnswerThatCannotBeVerifiedStartsNothing) {
  const std::vector<std::pair<const char*, FakeGate::Respond>> impostors = {
      {"a 403",
       [](int, const std::string&) {
         return std::pair<std::string, std::string>{"403 Forbidden", "{}"};
       }},
      {"an unsigned start",
       [](int, const std::string&) {
         return std::pair<std::string, std::string>{"200 OK", R"({"decision": "start"})"};
       }},
      {"a start signed with another key",
       [](int, const std::string& nonce) {
         return std::pair<std::string, std::string>{"200 OK",
                                                    signed_start(derive_rendezvous_key("other"), nonce)};
       }},
      {"a start signed for another question",
       [](int, const std::string&) {
         return std::pair<std::string, std::string>{"200 OK", signed_start(kKey, "an earlier nonce")};
       }},
      {"a forged stop", [](int, const std::string&) {
         return std::pair<std::string, std::string>{"200 OK", R"({"decision": "stop", "reason": "forged"})"};
       }}};
  for (const auto& [what, respond] : impostors) {
    FakeGate server(respond);
    auto t0 = Clock::now();
    GateVerdict verdict = wait_for_start(agent(server.address(), 1s), 0, "j-node-0-0");
    EXPECT_EQ(verdict.answer, GateAnswer::kLost) << what << ": " << verdict.reason;
    EXPECT_NE(verdict.reason.find("gave no answer that verifies for 1 s"), std::string::npos)
        << what << ": " << verdict.reason;
    EXPECT_GE(Clock::now() - t0, 1s) << what;
    EXPECT_GE(server.asked(), 2) << what << ": asked again until --lost-after";
  }
}

TEST(StartGate, SilenceStartsNothingUnlessTheOptOutSaysSo) {
  Launcher gone;
  std::string address = gone.address();
  gone.stop();
  GateVerdict verdict = wait_for_start(agent(address, 1s), 0, "j-node-0-0");
  EXPECT_EQ(verdict.answer, GateAnswer::kLost) << verdict.reason;
  EXPECT_NE(verdict.reason.find("TMPI_GATE_FAIL_OPEN=true"), std::string::npos) << verdict.reason;
}

}  // namespace
}  // namespace tmpi
