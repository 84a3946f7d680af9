// The API relay (rendezvous/api_relay.h): a relayed Event is taken only signed under the job
// key, fresh, once, of the right shape and within the limiter; the sidecar's forward sees only
// type, reason and message (the TrainJob is its own). The round trip over the loopback is
// here too; the one through the fake API, with the token in the sidecar's mount namespace
// alone, is tests/cluster/api_token_test.sh.
#include "rendezvous/api_relay.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "launcher/job_events.h"
#include "rendezvous/api_relay_server.h"

namespace tmpi::rdv {
namespace {

const std::string kRelayJobKey =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nrelay-test-key\n-----END OPENSSH PRIVATE KEY-----";
const std::string kRelayKey = derive_rendezvous_key(kRelayJobKey);
constexpr long long kNow = 1795744503000;
const RelayedEvent kFailed{"Warning", "RankFailed", "rank 1 on job-node-0-0 exited with code 3 after 4 s"};

std::variant<RelayedEvent, RelayRefusal> read_at(const std::string& body, long long now = kNow) {
  NonceWindow nonces;
  return read_relay_event(kRelayKey, body, now, nonces);
}

int refusal_status(const std::variant<RelayedEvent, RelayRefusal>& read) {
  return std::holds_alternative<RelayRefusal>(read) ? std::get<RelayRefusal>(read).status : 0;
}

TEST(ApiRelay, ASignedFreshEventIsTaken) {
  auto read = read_at(relay_event_body(kRelayKey, kFailed, random_nonce(), kNow - 500));
  ASSERT_TRUE(std::holds_alternative<RelayedEvent>(read)) << std::get<RelayRefusal>(read).why;
  const auto& event = std::get<RelayedEvent>(read);
  EXPECT_EQ(event.type, "Warning");
  EXPECT_EQ(event.reason, "RankFailed");
  EXPECT_EQ(event.message, kFailed.message);
}

TEST(ApiRelay, AnotherKeyOrAChangedFieldIsRefused) {
  const std::string other = derive_rendezvous_key("another job's key");
  EXPECT_EQ(refusal_status(read_at(relay_event_body(other, kFailed, random_nonce(), kNow))), 403);
  auto body = nlohmann::json::parse(relay_event_body(kRelayKey, kFailed, random_nonce(), kNow));
  body["message"] = "rank 0 is fine";
  EXPECT_EQ(refusal_status(read_at(body.dump())), 403);
}

TEST(ApiRelay, ItIsFreshAndTakenOnce) {
  NonceWindow nonces;
  const std::string body = relay_event_body(kRelayKey, kFailed, random_nonce(), kNow);
  EXPECT_EQ(refusal_status(read_relay_event(kRelayKey, body, kNow, nonces)), 0);
  EXPECT_EQ(refusal_status(read_relay_event(kRelayKey, body, kNow + 1000, nonces)), 409);  // a replay
  EXPECT_EQ(refusal_status(read_at(relay_event_body(kRelayKey, kFailed, random_nonce(), kNow - 61000))), 409);
  EXPECT_EQ(refusal_status(read_at(relay_event_body(kRelayKey, kFailed, random_nonce(), kNow + 61000))), 409);
}

TEST(ApiRelay, TheShapeIsChecked) {
  auto signed_with = [](nlohmann::json body) {
    body.erase("proof");
    body["proof"] = hmac_hex(kRelayKey, "api-event|" + body.dump());
    return body.dump();
  };
  auto good = nlohmann::json::parse(relay_event_body(kRelayKey, kFailed, random_nonce(), kNow));
  EXPECT_EQ(refusal_status(read_at(signed_with(good))), 0);
  for (auto change : std::vector<std::function<void(nlohmann::json&)>>{
           [](auto& b) {
             b["involvedObject"] = {{"name", "another-trainjob"}};
           },  // the sidecar's alone
           [](auto& b) { b.erase("reason"); },
           [](auto& b) { b["type"] = "Error"; },
           [](auto& b) { b["reason"] = "Rank Failed"; },
           [](auto& b) { b["reason"] = std::string(129, 'R'); },
           [](auto& b) { b["message"] = std::string(kRelayMessageBytes + 1, 'x'); },
           [](auto& b) { b["sentAt"] = "now"; },
           [](auto& b) { b["nonce"] = "NOT-HEX"; },
       }) {
    auto body = good;
    change(body);
    body["nonce"] = body["nonce"] == "NOT-HEX" ? body["nonce"] : nlohmann::json(random_nonce());
    EXPECT_EQ(refusal_status(read_at(signed_with(body))), 400) << body.dump();
  }
  // Out of the window at either end of the integers: refused as stale, no overflow on the way.
  for (long long sent_at : {std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max(),
                            kNow - 60001, kNow + 60001}) {
    auto body = good;
    body["sentAt"] = sent_at;
    body["nonce"] = random_nonce();
    EXPECT_EQ(refusal_status(read_at(signed_with(body))), 409) << sent_at;
  }
  EXPECT_EQ(refusal_status(read_at("[1, 2]")), 400);
  EXPECT_EQ(refusal_status(read_at("{\"type\": ")), 400);
  EXPECT_EQ(refusal_status(read_at(std::string(kRelayBodyBytes + 1, ' '))), 400);
}

TEST(ApiRelay, TheLimiterDropsRepeatsAndFloods) {
  RelayLimiter limiter;
  EXPECT_EQ(limiter.admit(kFailed, kNow), "");
  EXPECT_NE(limiter.admit(kFailed, kNow + 1000), "");  // the same Event again
  int taken = 1;
  for (int i = 0; i < 100; ++i)
    taken += limiter.admit({"Warning", "HostLost", std::to_string(i)}, kNow) == "";
  EXPECT_EQ(taken, RelayLimiter::kBurst);
  EXPECT_EQ(limiter.admit({"Warning", "HostLost", "later"}, kNow + RelayLimiter::kRefillMs), "");
  EXPECT_EQ(limiter.admit(kFailed, kNow + RelayLimiter::kDedupeMs + 1), "");  // forgotten after the window
}

TEST(ApiRelay, TheServerForwardsOnlyWhatHoldsFromLoopback) {
  std::vector<RelayedEvent> forwarded;
  std::string api_says;
  ApiRelay relay(kRelayJobKey, [&](const RelayedEvent& event) {
    forwarded.push_back(event);
    return api_says;
  });
  auto port = relay.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  auto answer = relay_event(*port, kRelayKey, kFailed, Millis(5000));
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_TRUE(answer->recorded) << answer->why;
  ASSERT_EQ(forwarded.size(), 1U);
  EXPECT_EQ(forwarded[0].message, kFailed.message);
  // The API's refusal reaches the launcher as the relay's why.
  api_says = "refused: the API refused the token: HTTP 403";
  answer = relay_event(*port, kRelayKey, {"Warning", "HostLost", "host x lost"}, Millis(5000));
  ASSERT_TRUE(answer);
  EXPECT_FALSE(answer->recorded);
  EXPECT_NE(answer->why.find("HTTP 502: refused"), std::string::npos) << answer->why;
  // Another key: refused before the API is asked.
  answer = relay_event(*port, derive_rendezvous_key("not the job key"), kFailed, Millis(5000));
  ASSERT_TRUE(answer);
  EXPECT_NE(answer->why.find("HTTP 403"), std::string::npos) << answer->why;
  EXPECT_EQ(forwarded.size(), 2U);
  // A peer that is not the pod's own loopback.
  Call outside;
  outside.method = "POST";
  outside.target = kRelayEventPath;
  outside.body = relay_event_body(kRelayKey, kFailed, random_nonce(), kNow);
  outside.peer = "10.0.0.7";
  EXPECT_EQ(relay.handle(outside).status, 403);
  EXPECT_EQ(forwarded.size(), 2U);
}

// The launcher's side: with no Kubernetes config of its own (the runtimes' `node` container),
// its Events go to the relay, signed under the job key in --ssh-dir; with no relay in the
// pod, one try, then none.
TEST(ApiRelay, TheLauncherRelaysWhereItHasNoConfig) {
  // No config of its own: KUBECONFIG, if the test's environment has one, is set aside (in a
  // pod, KUBERNETES_SERVICE_HOST leads to --service-account-dir, which holds no token here).
  const char* kubeconfig = std::getenv("KUBECONFIG");
  const std::string saved = kubeconfig != nullptr ? kubeconfig : "";
  ::unsetenv("KUBECONFIG");
  const auto dir = std::filesystem::temp_directory_path() / ("relay-test-" + random_nonce());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "id_ed25519") << kRelayJobKey;
  std::vector<RelayedEvent> forwarded;
  ApiRelay relay(kRelayJobKey, [&](const RelayedEvent& event) {
    forwarded.push_back(event);
    return std::string();
  });
  auto port = relay.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  launch::EventsOptions options;
  options.trainjob = "train";
  options.service_account_dir = (dir / "no-token-here").string();
  options.api_request_timeout = Millis(1000);
  options.relay_port = *port;
  options.ssh_dir = dir.string();
  launch::JobEvents events(options, "train");
  EXPECT_TRUE(events.warn("RankFailed", kFailed.message));
  ASSERT_EQ(forwarded.size(), 1U);
  EXPECT_EQ(forwarded[0].reason, "RankFailed");
  // A reason past the relay's bound (a preflight that names many hosts) is cut, not refused.
  EXPECT_TRUE(events.warn("PreflightFailed", std::string(6000, 'h') + "\u00fc"));
  ASSERT_EQ(forwarded.size(), 2U);
  EXPECT_LE(forwarded[1].message.size(), 1024U);
  EXPECT_TRUE(forwarded[1].message.ends_with("...")) << forwarded[1].message.substr(1000);
  options.relay_port = 1;  // nothing listens there
  launch::JobEvents unrelayed(options, "train");
  EXPECT_FALSE(unrelayed.warn("HostLost", "host x lost"));
  EXPECT_FALSE(unrelayed.warn("HostLost", "host y lost"));  // off after the first try
  std::filesystem::remove_all(dir);
  if (kubeconfig != nullptr) ::setenv("KUBECONFIG", saved.c_str(), 1);
}

}  // namespace
}  // namespace tmpi::rdv
