// The launcher's container killed whole at its memory limit, said by the launcher pod's
// sidecar. cgroup v2's memory.oom.group, which the kubelet sets on every container from
// Kubernetes 1.28 on, kills every process of a container at once: where a rank in the launcher
// pod (Trainer's runLauncherAsNode), or mpirun, runs the launcher's container out of memory,
// mpi-launcher dies with it, and writes no verdict, report or Event. A restricted pod cannot
// put its ranks in a cgroup of their own (or set an oom_score_adj of -1000, which the group
// kill spares), so the launcher cannot survive it; its pod's sidecar, in a container of its
// own, does. The kubelet stops a pod's sidecars (SIGTERM) once its main container has ended;
// at that signal the sidecar asks the API for its own pod, and where an app container of it
// ended OOMKilled, it sends the Warning Event the launcher could not (say_launcher_end, below):
// `kubectl describe trainjob` then names the OOM, the container and its limit. Any other end (the launcher's
// own exit, a deletion while it runs) says nothing: the launcher said its own verdict, or is being stopped.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "rendezvous/pod_status.h"

namespace tmpi::rdv {

inline constexpr int kLauncherEndAsks = 3;  // a second apart: the kubelet reports an end within one or two

// The Event's message where `pod` (the launcher's own) shows an app container ended OOMKilled;
// nullopt otherwise. `ranks_here`: the launcher pod is a host too (runLauncherAsNode).
std::optional<std::string> launcher_oom_message(const PodStatusSummary& pod, bool ranks_here);

// Asks `own_pod` up to kLauncherEndAsks times, until the pod shows an ended app container, and
// hands the message to `warn` where it ended OOMKilled. Never fails: a courtesy, as every Event.
using OwnPod = std::function<Expected<std::vector<PodStatusSummary>>()>;
void say_launcher_end(const OwnPod& own_pod, const std::function<void(const std::string&)>& warn,
                      bool ranks_here);

}  // namespace tmpi::rdv
