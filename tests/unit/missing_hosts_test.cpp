// The classifier of hosts that never came (launcher/missing_hosts.h): each of the three ways
// (the pod not scheduled or not running, by the API; running but never registered; registered
// but its SSH server not ready) gets its own line, fix and key; what a restart cannot mend is
// named first and ends the job with 78; without the API's answer the words of before stay.
#include "launcher/missing_hosts.h"

#include <gtest/gtest.h>

namespace tmpi::launch {
namespace {

const std::string kSummary = "1/3 hosts ready; waiting for a.j (no registration), b.j (no registration)";

PodStatusSummary pod_of(const std::string& host, const std::string& phase) {
  PodStatusSummary pod;
  pod.host = host;
  pod.found = true;
  pod.pod = host.substr(0, host.find('.')) + "-x7k2p";
  pod.phase = phase;
  return pod;
}

PodStatusSummary unschedulable(const std::string& host) {
  PodStatusSummary pod = pod_of(host, "Pending");
  pod.scheduled = "False";
  pod.scheduled_reason = "Unschedulable";
  pod.scheduled_message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";
  return pod;
}

PodStatusSummary waiting(const std::string& host, const std::string& reason) {
  PodStatusSummary pod = pod_of(host, "Pending");
  pod.scheduled = "True";
  pod.waiting.push_back({"node", reason, "Back-off pulling image \"r.example/t:v9\""});
  return pod;
}

AbsenceVerdict classify(const std::vector<MissingHost>& missing, const std::vector<PodStatusSummary>& pods) {
  return classify_missing(missing, pods, kSummary, 300, 29410, "TMPI_RENDEZVOUS_TIMEOUT");
}

std::string note(Trouble trouble) {
  return trouble_note(trouble);
}

TEST(MissingHosts, APodThatNoNodeFitsIsNamedWithTheSchedulersWordsAndEndsTheJobFor78) {
  auto verdict = classify({{"a.j", false, "no registration"}}, {unschedulable("a.j")});
  ASSERT_EQ(verdict.hosts.size(), 1U);
  EXPECT_EQ(verdict.exit, Exit::kConfig);
  EXPECT_EQ(verdict.hosts[0].trouble, Trouble::kHostNotScheduled);
  EXPECT_TRUE(verdict.hosts[0].lasting);
  EXPECT_EQ(
      verdict.message,
      "rendezvous timed out after 300 s (1/3 hosts ready); a restart would not mend it: a.j: its pod a-x7k2p "
      "was never scheduled (Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.); no node "
      "has what it asks: free GPUs or lower the request, or fix its node selector, tolerations or the "
      "queue's "
      "quota (under Kueue, admitted jobs fit the quota: the quota is larger than the nodes)" +
          note(Trouble::kHostNotScheduled));
  EXPECT_EQ(trouble_key_in(verdict.message), "host-not-scheduled");
}

TEST(MissingHosts, AGatedPodIsNotScheduledButMayComeLater) {
  PodStatusSummary gated = unschedulable("a.j");
  gated.scheduled_reason = "SchedulingGated";
  auto verdict = classify({{"a.j", false, "no registration"}}, {gated});
  EXPECT_EQ(verdict.exit, Exit::kTempFail);
  EXPECT_EQ(verdict.hosts[0].trouble, Trouble::kHostNotScheduled);
  EXPECT_NE(verdict.message.find("the scheduler has not taken it yet"), std::string::npos) << verdict.message;
}

TEST(MissingHosts, APodThatWaitsOnItsImageOrConfigIsNotRunning) {
  for (const char* reason :
       {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}) {
    auto verdict = classify({{"a.j", false, "no registration"}}, {waiting("a.j", reason)});
    EXPECT_EQ(verdict.exit, Exit::kConfig) << reason;
    EXPECT_EQ(verdict.hosts[0].trouble, Trouble::kHostNotRunning) << reason;
    EXPECT_NE(verdict.message.find(
                  std::string("its pod a-x7k2p is Pending, not running: container node waits (") + reason),
              std::string::npos)
        << verdict.message;
  }
  auto creating = classify({{"a.j", false, "no registration"}}, {waiting("a.j", "ContainerCreating")});
  EXPECT_EQ(creating.exit, Exit::kTempFail);
  EXPECT_NE(creating.message.find("`kubectl describe pod a-x7k2p` says more"), std::string::npos);
  PodStatusSummary no_pod;
  no_pod.host = "a.j";
  auto none = classify({{"a.j", false, "no registration"}}, {no_pod});
  EXPECT_EQ(none.exit, Exit::kTempFail);
  EXPECT_EQ(none.hosts[0].trouble, Trouble::kHostNotRunning);
  EXPECT_NE(none.message.find("no pod of the job has this name"), std::string::npos);
}

TEST(MissingHosts, APodThatRunsButNeverRegisteredPointsAtThePort) {
  auto verdict = classify({{"a.j", false, "no registration"}}, {pod_of("a.j", "Running")});
  EXPECT_EQ(verdict.exit, Exit::kTempFail);
  EXPECT_EQ(verdict.hosts[0].trouble, Trouble::kHostNeverRegistered);
  EXPECT_EQ(
      verdict.message,
      "rendezvous timed out after 300 s (1/3 hosts ready): a.j: its pod a-x7k2p runs, but its mpi-rendezvous "
      "sidecar never registered with the launcher on port 29410: a NetworkPolicy or firewall drops the port "
      "between the pods (install manifests/kubeflow/profile, or open 29410 and the SSH port), or the sidecar "
      "cannot reach the launcher (`kubectl logs a-x7k2p -c mpi-rendezvous`)" +
          note(Trouble::kHostNeverRegistered));
}

TEST(MissingHosts, EachHostHasItsLineAndTheOneARestartCannotMendLeads) {
  auto verdict = classify({{"a.j", false, "no registration"},
                           {"b.j", true, "sshd refused the job key"},
                           {"c.j", false, "no registration"}},
                          {pod_of("a.j", "Running"), unschedulable("c.j")});
  ASSERT_EQ(verdict.hosts.size(), 3U);
  EXPECT_EQ(verdict.hosts[0].host, "c.j");
  EXPECT_EQ(verdict.hosts[1].host, "a.j");
  EXPECT_EQ(verdict.hosts[2].host, "b.j");
  EXPECT_EQ(verdict.hosts[2].trouble, Trouble::kHostNotReady);
  EXPECT_EQ(verdict.hosts[2].line,
            "b.j: registered, but its SSH server was not ready (sshd refused the job key)" +
                note(Trouble::kHostNotReady));
  EXPECT_EQ(verdict.exit, Exit::kConfig);
  EXPECT_NE(verdict.message.find("(1/3 hosts ready; 2 more host(s) on lines of their own above)"),
            std::string::npos)
      << verdict.message;
  EXPECT_EQ(trouble_key_in(verdict.message), "host-not-scheduled");
}

TEST(MissingHosts, WithoutTheAPIsAnswerTheWordsOfBeforeStay) {
  auto verdict = classify_missing({{"a.j", false, "no registration"}}, std::nullopt, kSummary, 300, 29410,
                                  "TMPI_RENDEZVOUS_TIMEOUT");
  EXPECT_EQ(verdict.exit, Exit::kTempFail);
  EXPECT_EQ(verdict.message, "rendezvous timed out after 300 s: " + kSummary +
                                 "; raise TMPI_RENDEZVOUS_TIMEOUT" + note(Trouble::kHostNeverRegistered));
  auto ready = classify_missing({{"b.j", true, "sshd is not ready"}}, std::nullopt, "2/3 hosts ready", 300,
                                29410, "TMPI_RENDEZVOUS_TIMEOUT");
  EXPECT_EQ(trouble_key_in(ready.message), "host-not-ready");
}

}  // namespace
}  // namespace tmpi::launch
