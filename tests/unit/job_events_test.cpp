// The Kubernetes Event that the launcher records on the TrainJob: what `kubectl describe
// trainjob` matches (involvedObject with the uid) and shows (type, reason, message). The
// API round trip, and a refusal by RBAC, are in tests/cluster/launcher_test.sh.
#include "launcher/job_events.h"

#include <gtest/gtest.h>

namespace tmpi::launch {
namespace {

TEST(JobEvents, AnEventAboutTheTrainJob) {
  TrainJobRef trainjob{"team-a", "llm", "5e1f0000-aaaa-bbbb-cccc-000011112222"};
  auto when = std::chrono::system_clock::from_time_t(1795744503);  // 2026-11-27T01:55:03Z
  auto event = event_body(trainjob, "Warning", "RankFailed",
                          "rank 17 on llm-node-0-2 exited with code 3 after 41 s", "llm-launcher-0-0", when);
  EXPECT_EQ(event["metadata"]["generateName"], "llm.");
  EXPECT_EQ(event["metadata"]["namespace"], "team-a");
  EXPECT_EQ(event["involvedObject"], (nlohmann::json{{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                                                     {"kind", "TrainJob"},
                                                     {"name", "llm"},
                                                     {"namespace", "team-a"},
                                                     {"uid", "5e1f0000-aaaa-bbbb-cccc-000011112222"}}));
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["reason"], "RankFailed");
  EXPECT_EQ(event["message"], "rank 17 on llm-node-0-2 exited with code 3 after 41 s");
  EXPECT_EQ(event["firstTimestamp"], "2026-11-27T01:55:03Z");
  EXPECT_EQ(event["lastTimestamp"], event["firstTimestamp"]);
  EXPECT_EQ(event["count"], 1);
  EXPECT_EQ(event["reportingInstance"], "llm-launcher-0-0");
}

TEST(JobEvents, ALongMessageIsCut) {
  auto event = event_body({"ns", "tj", "uid"}, "Warning", "PreflightFailed", std::string(5000, 'x'), "l",
                          std::chrono::system_clock::now());
  std::string message = event["message"];
  EXPECT_EQ(message.size(), 1024U);
  EXPECT_EQ(message.substr(1021), "...");
}

}  // namespace
}  // namespace tmpi::launch
