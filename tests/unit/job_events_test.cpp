// The Kubernetes Event that the launcher records on the TrainJob: what `kubectl describe
// trainjob` matches (involvedObject with the uid) and shows (type, reason, message). The
// API round trip, and a refusal by RBAC, are in tests/cluster/launcher_test.sh.
#include "launcher/job_events.h"

#include <gtest/gtest.h>

#include "common/utf8.h"
#include "launcher/trouble_keys.h"

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

// A long reason (a fabric check's row, a preflight naming many hosts) keeps its troubleshooting
// note whole: the Event is where `kubectl describe trainjob` shows it, and the key is what the
// reader follows. A short one is untouched; one without a note is cut as before.
TEST(JobEvents, ALongMessageKeepsItsTroubleshootingKey) {
  const std::string note = trouble_note(Trouble::kFabricCheckFailed);
  std::string long_reason = "preflight failed on 1 check(s): ";
  for (int i = 0; i < 1500; ++i) long_reason += "\u00fc";  // 2 bytes each: a cut lands on a whole one
  const std::string message = event_message(long_reason + note);
  EXPECT_LE(message.size(), 1024U);
  EXPECT_EQ(valid_utf8(message), message);
  EXPECT_TRUE(message.ends_with("..." + note)) << message.substr(900);
  EXPECT_EQ(trouble_key_in(message), "fabric-check-failed");
  EXPECT_EQ(event_message("rank 1 exited with code 3" + note), "rank 1 exited with code 3" + note);
  EXPECT_EQ(event_message(std::string(2000, 'y')), std::string(1021, 'y') + "...");
  // A note in the middle (a stop that names what it stopped) is the message's key: kept at its end.
  const std::string stopped = "stopped: " + std::string(2000, 'z') + note + "; then more";
  EXPECT_TRUE(event_message(stopped).ends_with(note));
}

}  // namespace
}  // namespace tmpi::launch
