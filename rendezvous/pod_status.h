// What the Kubernetes API says of the job's pods that a host never came from: the third
// witness, beside the coordinator's two (never registered; registered, SSH not ready). The
// launcher pod's `mpi-rendezvous` sidecar, which alone holds an API token, lists its own
// JobSet's pods (label jobset.sigs.k8s.io/jobset-name) and answers the launcher, per host
// asked for, with a bounded summary: the pod's phase, its PodScheduled condition, each
// container that waits, with the kubelet's reason, and each that ended. The launcher's
// classifiers turn that into the line and the exit: launcher/missing_hosts.h for a host that
// never came, launcher/lost_host.h for one lost while the job ran (its container OOMKilled).
//
// The fields, from Kubernetes' own types (staging/src/k8s.io/api/core/v1/types.go: PodPhase
// Pending/Running/Succeeded/Failed/Unknown, PodConditionType PodScheduled, ContainerStateWaiting
// {reason, message}, ContainerStateTerminated {exitCode, reason}, ContainerStatus.lastState); the
// kubelet passes on the runtime's reason, "OOMKilled" where the container's cgroup saw an OOM
// kill (containerd's CRI plugin, pkg/cri/server/helpers.go: oomExitReason); the scheduler sets
// PodScheduled=False with reason "Unschedulable" (v1.PodReasonUnschedulable) and its fit error as the message
// when no node fits (pkg/scheduler/schedule_one.go, handleSchedulingFailure); the kubelet's waiting reasons
// are its own words (pkg/kubelet/images/types.go: ErrImagePull, ImagePullBackOff, InvalidImageName,
// ErrImageNeverPull; pkg/kubelet/kuberuntime/kuberuntime_container.go: CreateContainerConfigError).
//
// Both readings here are pure (unit-tested, fuzzed: fuzz_pod_status): the API's pod list,
// page by page (only the fields below are kept while parsing, so a 10,000-pod page costs
// little), and the relay's answer as the launcher reads it. Everything is outside input:
// bounded in count and length, cut at a whole character, checked for shape.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tmpi {

inline constexpr std::size_t kPodStatusHosts = 64;   // hosts one request may ask about
inline constexpr std::size_t kPodStatusWaiting = 8;  // waiting containers kept per pod, and ended ones
inline constexpr std::size_t kPodStatusReasonBytes = 128;
inline constexpr std::size_t kPodStatusMessageBytes = 512;
// The relay's answer, at most: 64 hosts, each a name, a scheduling message and 8 waiting
// containers' reasons and messages at their bounds (~7 KB), escaped JSON around them.
inline constexpr std::size_t kPodStatusAnswerBytes = 1024 * 1024;

struct WaitingContainer {
  std::string container, reason, message;
};

// A container that ended (its state, or its last state where the kubelet started it again):
// the kubelet's reason ("OOMKilled", "Error", "Completed"), its exit code, and the memory limit
// its spec gives it ("300Mi"; "" for none), which is the limit its cgroup was killed at.
struct EndedContainer {
  std::string container, reason;
  int exit_code = 0;
  std::string memory_limit;
};

// One pod as the launcher needs it. `found` false: no pod of the JobSet holds the host's name.
struct PodStatusSummary {
  std::string host;  // spec.hostname + "." + spec.subdomain: the hostfile's name
  bool found = false;
  std::string pod;                // metadata.name
  std::string phase;              // Pending, Running, Succeeded, Failed, Unknown (another word: "Unknown")
  bool terminating = false;       // metadata.deletionTimestamp set
  std::string scheduled;          // the PodScheduled condition's status: "True", "False", "" (none)
  std::string scheduled_reason;   // its reason ("Unschedulable", "SchedulingGated", ...)
  std::string scheduled_message;  // the scheduler's fit error ("0/3 nodes are available: ...")
  std::vector<WaitingContainer> waiting;  // init containers first, then the others
  std::vector<EndedContainer> ended;      // the app containers only (a rank runs in none of the others)
};

// The pods of the hosts asked for, as the list's pages are read: for each host, the pod that
// answers for it (one not being deleted, over one that is; then the later restart attempt).
class PodStatusReader {
 public:
  explicit PodStatusReader(std::vector<std::string> hosts);
  // One page of GET pods (a v1 PodList). Returns the `continue` token ("" at the end), or an
  // error naming the page (`origin`) and what is wrong with it.
  Expected<std::string> add(std::string_view page, std::string_view origin);
  // Every host asked for has a pod: no more pages are needed.
  bool all_found() const;
  // One summary per host asked for, in the order asked (found = false where none was seen).
  std::vector<PodStatusSummary> summaries() const;

 private:
  struct Kept {
    PodStatusSummary summary;
    long long attempt = -1;
  };
  std::vector<std::string> hosts_;
  std::map<std::string, Kept, std::less<>> kept_;
};

// The relay's answer: {"hosts": [summary...]} and back. The reading checks the shape and
// every bound above, and refuses what does not hold (an error naming the field).
nlohmann::json pod_statuses_json(const std::vector<PodStatusSummary>& pods);
Expected<std::vector<PodStatusSummary>> read_pod_statuses(std::string_view body);

}  // namespace tmpi
