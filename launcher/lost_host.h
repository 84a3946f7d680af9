// A host lost while the job ran, and the Kubernetes API's word on its pod. Where the kubelet
// says the pod's container ended "OOMKilled", the kernel killed that container whole at its
// memory limit: cgroup v2's memory.oom.group, which the kubelet sets on every container from
// Kubernetes 1.28 on, ends every process in it at once, the rank, its agent and the SSH
// server alike, so nothing of the job's on that host is left to say why. The job's failure is
// then the program's, as the rank's own OOM kill is where its agent survives to report it:
// exit 137, troubleshooting key rank-out-of-memory, no restart (a new pod would run out of
// memory alike). Any other end of the container, or none yet, leaves the host lost (75).
//
//   the pod's app container ended     the job's failure
//   reason OOMKilled                  137, rank-out-of-memory, the container and its limit named
//   another reason, or still running  the lost host's, unchanged
//
// The API is asked through the launcher pod's sidecar (launcher/job_events.h, pods()); the
// kubelet reports a container's end a second or two after it (its relist), so the launcher
// asks up to kLostPodAsks times over kLostPodAskSpan before it gives up and keeps the host lost.
#pragma once

#include <optional>

#include "common/clock.h"
#include "launcher/failure.h"
#include "rendezvous/pod_status.h"

namespace tmpi::launch {

inline constexpr int kLostPodAsks = 3;
inline constexpr Millis kLostPodAskSpan(2500);

// The failure that replaces `lost` (a kHostLost failure naming its host) where `pod`, the
// API's summary of the host's pod, shows an app container ended OOMKilled; nullopt otherwise.
std::optional<Failure> lost_host_out_of_memory(const Failure& lost, const PodStatusSummary& pod);

}  // namespace tmpi::launch
