// A host lost while the job ran, and the API's word on its pod (launcher/lost_host.h): a
// container the kernel killed whole at its memory limit is the program's failure (137,
// rank-out-of-memory, never restarted), and any other end leaves the host lost.
#include "launcher/lost_host.h"

#include <gtest/gtest.h>

#include "launcher/restarts.h"

namespace tmpi::launch {
namespace {

Failure lost(const std::string& host) {
  Failure failure{75, "host " + host + " lost (no beat for 10 s) (see docs/troubleshooting.md#host-lost)",
                  FailureKind::kHostLost};
  failure.host = host;
  return failure;
}

PodStatusSummary pod_with(const std::string& reason, const std::string& limit) {
  PodStatusSummary pod;
  pod.host = "n-0.train";
  pod.found = true;
  pod.pod = "train-node-0-0-x7k2p";
  pod.phase = "Failed";
  pod.ended.push_back({"node", reason, 137, limit});
  return pod;
}

TEST(LostHost, AContainerOomKilledWholeIsTheProgramsOutOfMemoryNotALostHost) {
  auto failure = lost_host_out_of_memory(lost("n-0.train"), pod_with("OOMKilled", "300Mi"));
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, 137);
  EXPECT_EQ(event_reason(failure->event), "RankFailed");
  EXPECT_TRUE(failure->oom_killed);
  EXPECT_EQ(failure->host, "n-0.train");
  EXPECT_EQ(
      failure->reason,
      "host n-0.train lost: the kernel's OOM killer killed its pod train-node-0-0-x7k2p's container node "
      "whole at its limit of 300Mi (the kubelet says OOMKilled, exit 137), and the ranks there with it; give "
      "the pod more memory, or the ranks less to hold (see docs/troubleshooting.md#rank-out-of-memory)");
  EXPECT_EQ(restart_cause(*failure, {137}), std::nullopt) << "a new attempt would run out of memory alike";
  auto no_limit = lost_host_out_of_memory(lost("n-0.train"), pod_with("OOMKilled", ""));
  ASSERT_TRUE(no_limit);
  EXPECT_EQ(no_limit->reason.find("at its limit"), std::string::npos) << no_limit->reason;
}

TEST(LostHost, AnyOtherEndOrNoPodLeavesTheHostLost) {
  EXPECT_FALSE(lost_host_out_of_memory(lost("n-0.train"), pod_with("Error", "300Mi")));
  EXPECT_FALSE(lost_host_out_of_memory(lost("n-0.train"), pod_with("Completed", "")));
  PodStatusSummary none;
  none.host = "n-0.train";
  EXPECT_FALSE(lost_host_out_of_memory(lost("n-0.train"), none));
  Failure rank{3, "rank 1 exited with code 3", FailureKind::kRankFailed};
  EXPECT_FALSE(lost_host_out_of_memory(rank, pod_with("OOMKilled", "300Mi")))
      << "only a lost host is asked about";
}

}  // namespace
}  // namespace tmpi::launch
