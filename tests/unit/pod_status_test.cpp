// The pods of hosts that never came (rendezvous/pod_status.h): the API's pod list read into
// bounded summaries (phase, PodScheduled, the waiting and the ended containers), the relay's answer read
// back with the same bounds, and the signed request for them through the relay over the
// loopback (rendezvous/api_relay.h), a refusal of the API told apart from a failure.
#include "rendezvous/pod_status.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "rendezvous/api_relay.h"
#include "rendezvous/api_relay_server.h"

namespace tmpi {
namespace {

using nlohmann::json;

const std::string kPodsJobKey =
    "-----BEGIN OPENSSH PRIVATE KEY-----\npods-test-key\n-----END OPENSSH PRIVATE KEY-----";
constexpr long long kPodsNow = 1795744503000;

// A pod as the API serves it, with the fields a summary reads, and some it skips.
json api_pod(const std::string& hostname, const std::string& phase, json status_extra = json::object(),
             int attempt = 0) {
  json pod = {
      {"metadata",
       {{"name", hostname + "-x7k2p"},
        {"labels",
         {{"jobset.sigs.k8s.io/jobset-name", "train"},
          {"jobset.sigs.k8s.io/restart-attempt", std::to_string(attempt)}}}}},
      {"spec", {{"hostname", hostname}, {"subdomain", "train"}, {"containers", {{{"name", "node"}}}}}},
      {"status", {{"phase", phase}}}};
  pod["status"].update(status_extra);
  return pod;
}

json unschedulable() {
  return {{"conditions",
           {{{"type", "PodScheduled"},
             {"status", "False"},
             {"reason", "Unschedulable"},
             {"message",
              "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
              "available: 3 No preemption victims found for incoming pod."}}}}};
}

json image_pull_backoff() {
  return {{"conditions", {{{"type", "PodScheduled"}, {"status", "True"}}}},
          {"initContainerStatuses", {{{"name", "mpi-init"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}}},
          {"containerStatuses",
           {{{"name", "node"},
             {"state",
              {{"waiting",
                {{"reason", "ImagePullBackOff"},
                 {"message", "Back-off pulling image \"registry.example/trainer:v9\""}}}}}}}}};
}

std::string page_of(const std::vector<json>& items, const std::string& next = "") {
  json list = {
      {"apiVersion", "v1"}, {"kind", "PodList"}, {"metadata", json::object()}, {"items", json(items)}};
  if (!next.empty()) list["metadata"]["continue"] = next;
  return list.dump();
}

TEST(PodStatus, ThePodListIsReadIntoOneSummaryPerHostAsked) {
  PodStatusReader reader(
      {"train-node-0-1.train", "train-node-0-2.train", "train-node-0-3.train", "gone.train"});
  auto next = reader.add(
      page_of({api_pod("train-node-0-0", "Running"), api_pod("train-node-0-1", "Pending", unschedulable()),
               api_pod("train-node-0-2", "Pending", image_pull_backoff())},
              "token-2"),
      "page 1");
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(*next, "token-2");
  EXPECT_FALSE(reader.all_found());
  ASSERT_TRUE(reader.add(page_of({api_pod("train-node-0-3", "Running")}), "page 2"));
  auto pods = reader.summaries();
  ASSERT_EQ(pods.size(), 4U);
  EXPECT_EQ(pods[0].host, "train-node-0-1.train");
  EXPECT_EQ(pods[0].pod, "train-node-0-1-x7k2p");
  EXPECT_EQ(pods[0].phase, "Pending");
  EXPECT_EQ(pods[0].scheduled, "False");
  EXPECT_EQ(pods[0].scheduled_reason, "Unschedulable");
  EXPECT_TRUE(
      pods[0].scheduled_message.starts_with("0/3 nodes are available: 3 Insufficient nvidia.com/gpu."));
  EXPECT_EQ(pods[1].scheduled, "True");
  ASSERT_EQ(pods[1].waiting.size(), 1U);  // the init container that ended does not wait
  EXPECT_EQ(pods[1].waiting[0].container, "node");
  EXPECT_EQ(pods[1].waiting[0].reason, "ImagePullBackOff");
  EXPECT_EQ(pods[2].phase, "Running");
  EXPECT_TRUE(pods[2].waiting.empty());
  EXPECT_FALSE(pods[3].found);  // no pod of the job holds that name
}

TEST(PodStatus, ALivePodAnswersForItsHostOverOneBeingDeletedAndTheLaterAttempt) {
  json deleted = api_pod("train-node-0-1", "Running", json::object(), 2);
  deleted["metadata"]["deletionTimestamp"] = "2026-12-07T15:00:00Z";
  PodStatusReader reader({"train-node-0-1.train"});
  ASSERT_TRUE(reader.add(page_of({api_pod("train-node-0-1", "Failed", json::object(), 0), deleted,
                                  api_pod("train-node-0-1", "Pending", unschedulable(), 1)}),
                         "page"));
  auto pods = reader.summaries();
  ASSERT_EQ(pods.size(), 1U);
  EXPECT_EQ(pods[0].phase, "Pending");
  EXPECT_FALSE(pods[0].terminating);
  EXPECT_TRUE(reader.all_found());
}

TEST(PodStatus, EveryTextIsBoundedAndValidUtf8AndTheShapeIsChecked) {
  json status = unschedulable();
  std::string accents;
  for (int i = 0; i < 400; ++i) accents += "\u00e9";  // 2 bytes each: a cut at 512 must not split one
  status["conditions"][0]["message"] = "x" + accents;
  status["phase"] = "Exploded";
  json many = json::array();
  for (int i = 0; i < 20; ++i)
    many.push_back({{"name", "c" + std::to_string(i)},
                    {"state", {{"waiting", {{"reason", std::string(300, 'R')}, {"message", accents}}}}}});
  status["containerStatuses"] = many;
  PodStatusReader reader({"train-node-0-1.train"});
  json pod = api_pod("train-node-0-1", "Pending", status);
  pod["status"]["phase"] = "Exploded";
  ASSERT_TRUE(reader.add(page_of({pod, "not a pod", json::array()}), "page"));
  auto pods = reader.summaries();
  ASSERT_EQ(pods.size(), 1U);
  EXPECT_EQ(pods[0].phase, "Unknown");
  EXPECT_LE(pods[0].scheduled_message.size(), kPodStatusMessageBytes);
  EXPECT_TRUE(pods[0].scheduled_message.ends_with("\u00e9...")) << pods[0].scheduled_message;
  EXPECT_EQ(pods[0].waiting.size(), kPodStatusWaiting);
  EXPECT_LE(pods[0].waiting[0].reason.size(), kPodStatusReasonBytes);
  auto back = read_pod_statuses(pod_statuses_json(pods).dump());
  ASSERT_TRUE(back) << back.error().message;  // what the relay writes, the launcher reads
  EXPECT_EQ((*back)[0].scheduled_message, pods[0].scheduled_message);
  EXPECT_EQ((*back)[0].waiting.size(), kPodStatusWaiting);
  // Not a PodList: an error that names the page.
  PodStatusReader other({"a.b"});
  auto html = other.add("<html>proxy login</html>", "pods of JobSet train (page 1)");
  ASSERT_FALSE(html);
  EXPECT_NE(html.error().message.find("pods of JobSet train (page 1): not valid JSON"), std::string::npos);
  EXPECT_FALSE(other.add(R"({"items": {}})", "page"));
  EXPECT_FALSE(other.add("{\"items\": [{\"spec\": {\"hostname\": \"a\xff\"}}]}", "page"));  // not UTF-8
}

// A container the kernel killed at its limit: its end (or its previous end, where the kubelet
// started it again) with the limit its spec gives it, carried through the relay's answer; an
// init container's end is no rank's, and is not kept.
TEST(PodStatus, AnEndedContainerIsKeptWithItsReasonCodeAndMemoryLimit) {
  json oom = api_pod(
      "n-0", "Failed",
      {{"initContainerStatuses",
        {{{"name", "mpi-init"}, {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}}},
       {"containerStatuses",
        {{{"name", "node"}, {"state", {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}}}}}}});
  oom["spec"]["containers"][0]["resources"] = {{"limits", {{"memory", "300Mi"}, {"cpu", "2"}}}};
  json again = api_pod("n-1", "Running",
                       {{"containerStatuses",
                         {{{"name", "node"},
                           {"state", {{"running", {{"startedAt", "2026-12-07T19:00:00Z"}}}}},
                           {"lastState", {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}}}}}}});
  json running =
      api_pod("n-2", "Running",
              {{"containerStatuses", {{{"name", "node"}, {"state", {{"running", json::object()}}}}}}});
  PodStatusReader reader({"n-0.train", "n-1.train", "n-2.train"});
  ASSERT_TRUE(reader.add(page_of({oom, again, running}), "page 1"));
  auto pods = reader.summaries();
  ASSERT_EQ(pods.size(), 3U);
  ASSERT_EQ(pods[0].ended.size(), 1U);
  EXPECT_EQ(pods[0].ended[0].container, "node");
  EXPECT_EQ(pods[0].ended[0].reason, "OOMKilled");
  EXPECT_EQ(pods[0].ended[0].exit_code, 137);
  EXPECT_EQ(pods[0].ended[0].memory_limit, "300Mi");
  ASSERT_EQ(pods[1].ended.size(), 1U) << "the last state, where the container runs again";
  EXPECT_EQ(pods[1].ended[0].reason, "OOMKilled");
  EXPECT_EQ(pods[1].ended[0].memory_limit, "");
  EXPECT_TRUE(pods[2].ended.empty());
  auto back = read_pod_statuses(pod_statuses_json(pods).dump());
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ((*back)[0].ended.size(), 1U);
  EXPECT_EQ((*back)[0].ended[0].exit_code, 137);
  EXPECT_EQ((*back)[0].ended[0].memory_limit, "300Mi");
  json bad = pod_statuses_json(pods);
  bad["hosts"][0]["ended"][0]["exitCode"] = 300;
  EXPECT_FALSE(read_pod_statuses(bad.dump()));
  bad["hosts"][0]["ended"] = json::array();
  for (std::size_t i = 0; i <= kPodStatusWaiting; ++i)
    bad["hosts"][0]["ended"].push_back(pod_statuses_json(pods)["hosts"][0]["ended"][0]);
  EXPECT_FALSE(read_pod_statuses(bad.dump()));
}

TEST(PodStatus, TheRelaysAnswerIsReadWithinItsBounds) {
  EXPECT_FALSE(read_pod_statuses("[]"));
  EXPECT_FALSE(read_pod_statuses(R"({"hosts": [{"host": "a", "found": "yes"}]})"));
  EXPECT_FALSE(read_pod_statuses(R"({"hosts": [{"host": "a", "found": true, "pod": "p"}]})"));
  PodStatusSummary pending;
  pending.host = "a";
  pending.found = true;
  pending.pod = "p";
  pending.phase = "Pending";
  json long_reason = pod_statuses_json({pending});
  long_reason["hosts"][0]["scheduledReason"] = std::string(kPodStatusReasonBytes + 1, 'x');
  EXPECT_FALSE(read_pod_statuses(long_reason.dump()));
  json too_many = {{"hosts", json::array()}};
  for (std::size_t i = 0; i <= kPodStatusHosts; ++i)
    too_many["hosts"].push_back({{"host", "h"}, {"found", false}});
  EXPECT_FALSE(read_pod_statuses(too_many.dump()));
  EXPECT_FALSE(read_pod_statuses(std::string(kPodStatusAnswerBytes + 1, ' ')));
  auto none = read_pod_statuses(R"({"hosts": [{"host": "a.b", "found": false}]})");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE((*none)[0].found);
}

TEST(PodStatus, ThePodsRequestIsSignedFreshAndOfHostNamesOnly) {
  const std::string key = derive_rendezvous_key(kPodsJobKey);
  auto read = [&](const std::string& body, long long now = kPodsNow) {
    rdv::NonceWindow nonces;
    return rdv::read_relay_pods(key, body, now, nonces);
  };
  auto status = [](const auto& outcome) {
    return std::holds_alternative<rdv::RelayRefusal>(outcome) ? std::get<rdv::RelayRefusal>(outcome).status
                                                              : 0;
  };
  auto taken = read(rdv::relay_pods_body(key, {"train-node-0-1.train"}, random_nonce(), kPodsNow));
  ASSERT_EQ(status(taken), 0) << std::get<rdv::RelayRefusal>(taken).why;
  EXPECT_EQ(std::get<std::vector<std::string>>(taken), std::vector<std::string>{"train-node-0-1.train"});
  EXPECT_EQ(status(read(rdv::relay_pods_body(derive_rendezvous_key("x"), {"a"}, random_nonce(), kPodsNow))),
            403);
  EXPECT_EQ(status(read(rdv::relay_pods_body(key, {"a"}, random_nonce(), kPodsNow - 61000))), 409);
  EXPECT_EQ(status(read(rdv::relay_pods_body(key, {"A/../secrets"}, random_nonce(), kPodsNow))), 400);
  EXPECT_EQ(status(read(rdv::relay_pods_body(key, {}, random_nonce(), kPodsNow))), 400);
  EXPECT_EQ(status(read(rdv::relay_pods_body(key, std::vector<std::string>(kPodStatusHosts + 1, "h"),
                                             random_nonce(), kPodsNow))),
            400);
  // An Event's proof does not open the pods (each request is signed under its own label).
  auto event = json::parse(rdv::relay_event_body(key, {"Warning", "X", "y"}, random_nonce(), kPodsNow));
  json pods = {
      {"hosts", {"a"}}, {"nonce", event["nonce"]}, {"sentAt", event["sentAt"]}, {"proof", event["proof"]}};
  EXPECT_EQ(status(read(pods.dump())), 403);
  rdv::PodListLimiter limiter;
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += limiter.admit(kPodsNow) == "";
  EXPECT_EQ(admitted, rdv::PodListLimiter::kBurst);
  EXPECT_EQ(limiter.admit(kPodsNow + rdv::PodListLimiter::kRefillMs), "");
}

TEST(PodStatus, TheRelayListsThePodsForTheLauncherAndTellsARefusalApart) {
  rdv::RelayedPods api_says;
  std::vector<std::string> asked;
  rdv::ApiRelay relay(kPodsJobKey, [](const rdv::RelayedEvent&) { return std::string(); });
  relay.serve_pods([&](const std::vector<std::string>& hosts) {
    asked = hosts;
    return api_says;
  });
  auto port = relay.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  const std::string key = derive_rendezvous_key(kPodsJobKey);
  PodStatusReader reader({"train-node-0-1.train"});
  ASSERT_TRUE(reader.add(page_of({api_pod("train-node-0-1", "Pending", unschedulable())}), "page"));
  api_says = {rdv::RelayedPods::Outcome::kListed, reader.summaries(), ""};
  auto answer = rdv::relay_pods(*port, key, {"train-node-0-1.train"}, Millis(5000));
  ASSERT_TRUE(answer) << answer.error().message;
  ASSERT_EQ(answer->outcome, rdv::RelayedPods::Outcome::kListed) << answer->why;
  EXPECT_EQ(asked, std::vector<std::string>{"train-node-0-1.train"});
  ASSERT_EQ(answer->pods.size(), 1U);
  EXPECT_EQ(answer->pods[0].scheduled_reason, "Unschedulable");
  api_says = {rdv::RelayedPods::Outcome::kRefused, {}, "list pods: HTTP 403: pods is forbidden"};
  answer = rdv::relay_pods(*port, key, {"train-node-0-1.train"}, Millis(5000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->outcome, rdv::RelayedPods::Outcome::kRefused);
  EXPECT_NE(answer->why.find("pods is forbidden"), std::string::npos) << answer->why;
  answer = rdv::relay_pods(*port, derive_rendezvous_key("not the job key"), {"a"}, Millis(5000));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->outcome, rdv::RelayedPods::Outcome::kFailed);
  EXPECT_NE(answer->why.find("HTTP 403"), std::string::npos) << answer->why;
  // The most hosts one request may ask about, each a long DNS name: a request past an Event's
  // 8 KiB, which the relay's server still takes.
  std::vector<std::string> many;
  for (std::size_t i = 0; i < kPodStatusHosts; ++i)
    many.push_back(fmt::format("{}-{}.{}", std::string(60, 'n'), i, std::string(100, 's')));
  api_says = {rdv::RelayedPods::Outcome::kListed, {}, ""};
  answer = rdv::relay_pods(*port, key, many, Millis(5000));
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ(answer->outcome, rdv::RelayedPods::Outcome::kListed) << answer->why;
  EXPECT_EQ(asked.size(), kPodStatusHosts);
}

}  // namespace
}  // namespace tmpi
