// The launcher's container killed whole at its memory limit, said by its pod's sidecar
// (rendezvous/launcher_end.h): an app container ended OOMKilled names the OOM, the container
// and its limit; any other end, or none yet within the asks, says nothing.
#include "rendezvous/launcher_end.h"

#include <gtest/gtest.h>

namespace tmpi::rdv {
namespace {

PodStatusSummary launcher_pod(const std::string& reason) {
  PodStatusSummary pod;
  pod.host = "train-launcher-0-0";
  pod.found = true;
  pod.pod = "train-launcher-0-0-x7k2p";
  pod.phase = "Failed";
  if (!reason.empty()) pod.ended.push_back({"launcher", reason, 137, "300Mi"});
  return pod;
}

TEST(LauncherEnd, AnOomKilledLauncherContainerIsNamedWithItsLimitAndTheRanksInIt) {
  auto message = launcher_oom_message(launcher_pod("OOMKilled"), true);
  ASSERT_TRUE(message);
  EXPECT_EQ(
      *message,
      "the kernel's OOM killer killed the launcher pod train-launcher-0-0-x7k2p's container launcher whole "
      "at "
      "its limit of 300Mi (the kubelet says OOMKilled, exit 137), mpi-launcher and the ranks in it "
      "(runLauncherAsNode) with it, so no verdict was written; give the launcher pod more memory, or its "
      "ranks less to hold (see docs/troubleshooting.md#rank-out-of-memory)");
  auto alone = launcher_oom_message(launcher_pod("OOMKilled"), false);
  ASSERT_TRUE(alone);
  EXPECT_NE(alone->find("mpi-launcher and mpirun with it"), std::string::npos) << *alone;
  EXPECT_FALSE(launcher_oom_message(launcher_pod("Error"), true));
  EXPECT_FALSE(launcher_oom_message(launcher_pod("Completed"), true));
  EXPECT_FALSE(launcher_oom_message(PodStatusSummary{}, true));
}

TEST(LauncherEnd, AskedUntilTheContainerEndedThenSaidOnceOrNotAtAll) {
  int asked = 0;
  std::vector<std::string> said;
  auto warn = [&](const std::string& message) { said.push_back(message); };
  // The kubelet reports the end on the second ask.
  say_launcher_end(
      [&]() -> Expected<std::vector<PodStatusSummary>> {
        ++asked;
        return std::vector<PodStatusSummary>{launcher_pod(asked < 2 ? "" : "OOMKilled")};
      },
      warn, true);
  EXPECT_EQ(asked, 2);
  ASSERT_EQ(said.size(), 1U);
  // The launcher's own exit: asked once, nothing said.
  asked = 0;
  say_launcher_end(
      [&]() -> Expected<std::vector<PodStatusSummary>> {
        ++asked;
        return std::vector<PodStatusSummary>{launcher_pod("Error")};
      },
      warn, true);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(said.size(), 1U);
  // No API: one try, nothing said.
  asked = 0;
  say_launcher_end(
      [&]() -> Expected<std::vector<PodStatusSummary>> {
        ++asked;
        return make_error(Exit::kNoPerm, "pods is forbidden");
      },
      warn, true);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(said.size(), 1U);
}

}  // namespace
}  // namespace tmpi::rdv
